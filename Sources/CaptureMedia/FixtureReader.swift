import CFFmpeg
import CaptureCore
import Foundation
import Logging

/// An input AVFormatContext, closed exactly once.
final class DemuxerOwner {
    var context: UnsafeMutablePointer<AVFormatContext>?
    /// Wall-clock deadline (host seconds) read by the interrupt callback; freed with the owner.
    private let deadline = UnsafeMutablePointer<Double>.allocate(capacity: 1)

    /// Opens `path` as NUT (no probing: any other content fails here). A damaged file can send
    /// libavformat's NUT demuxer into long resynchronisation scans, so every blocking call is
    /// interrupted after `timeLimit` seconds and fails instead of hanging.
    init(nutPath path: String, timeLimit: Double = 5) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        CaptureLogging.logger(.media).debug("opening fixture", metadata: ["path": "\(path)"])
        deadline.pointee = HostClock.now().seconds + timeLimit
        guard let fc = avformat_alloc_context() else {
            throw .codecFailure(operation: "avformat_alloc_context", code: -12, message: "out of memory")
        }
        fc.pointee.interrupt_callback.callback = { opaque in
            guard let opaque else { return 0 }
            return HostClock.now().seconds > opaque.assumingMemoryBound(to: Double.self).pointee ? 1 : 0
        }
        fc.pointee.interrupt_callback.opaque = UnsafeMutableRawPointer(deadline)
        context = fc
        // On failure avformat_open_input frees the context and sets it to nil.
        try FFmpeg.check(FFmpeg.openLocalInput(&context, path, format: av_find_input_format("nut")), "opening \(path) as NUT")
    }

    deinit {
        avformat_close_input(&context)
        deadline.deallocate()
    }
}

/// Reads and validates a whole fixture (layout: `FixtureFormat`). Every problem — truncation,
/// corruption, a foreign file, another version — is a typed error naming what is wrong.
public enum FixtureReader {
    public static func read(path: String) throws(CaptureError) -> FixtureContents {
        func invalid(_ problem: String) -> CaptureError { .invalidFixture(path: path, problem: problem) }
        if let kind = InputFile.nonRegularKind(path) {
            throw invalid("it is \(kind), not a regular file (reading it could wait for ever); give a fixture file")
        }
        guard FileManager.default.isReadableFile(atPath: path) else { throw invalid("no readable file there") }
        let demuxer: DemuxerOwner
        do {
            demuxer = try DemuxerOwner(nutPath: path)
        } catch {
            throw invalid("not a NUT container, or its header is truncated or corrupted (\(error))")
        }
        guard let fc = demuxer.context else { throw invalid("libavformat returned no context") }
        guard let versionEntry = av_dict_get(fc.pointee.metadata, FixtureFormat.versionKey, nil, 0) else {
            throw invalid("no \(FixtureFormat.versionKey) metadata: not a CaptureKit fixture")
        }
        let versionText = String(cString: versionEntry.pointee.value)
        guard let version = Int(versionText), FixtureFormat.readableVersions.contains(version) else {
            throw .unsupportedFixtureVersion(path: path, version: versionText, supported: FixtureFormat.version)
        }
        // Every packet: the media ones per stream, the records in order; the first record is the profile.
        let streamCount = Int(fc.pointee.nb_streams)
        guard streamCount >= 2 else { throw invalid("\(streamCount) streams: a fixture has one per device plus the record stream") }
        var payloads: [[[UInt8]]] = Array(repeating: [], count: streamCount - 1)
        var records: [[String: Any]] = []
        let packet = try PacketOwner()
        while true {
            let r = av_read_frame(fc, packet.packet)
            if r == FFmpeg.eof { break }
            if r < 0 { throw invalid("corrupted container after \(records.count) records (\(FFmpeg.message(r)))") }
            defer { av_packet_unref(packet.packet) }
            let p = packet.packet.pointee
            let bytes = p.size > 0 && p.data != nil ? Array(UnsafeBufferPointer(start: p.data, count: Int(p.size))) : []
            let index = Int(p.stream_index)
            if index < streamCount - 1 {
                payloads[index].append(bytes)
            } else {
                guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
                    throw invalid("corrupted record \(records.count): not a JSON object")
                }
                records.append(object)
            }
        }
        guard let profileRecord = records.first else { throw invalid("truncated: no profile record") }
        let devices: [FixtureDevice]
        do throws(FixtureJSON.Problem) {
            devices = try FixtureJSON.decode(FixtureJSON.object(profileRecord["profile"], "profile"))
        } catch {
            throw invalid("profile field '\(error.field)': \(error.problem)")
        }
        guard Int(fc.pointee.nb_streams) == devices.count + 1 else {
            throw invalid("\(fc.pointee.nb_streams) streams for \(devices.count) devices (expected one per device plus the record stream)")
        }
        for (i, device) in devices.enumerated() {
            let type = fc.pointee.streams[i]!.pointee.codecpar.pointee.codec_type
            let expected = device.description.mediaType == .video ? AVMEDIA_TYPE_VIDEO : AVMEDIA_TYPE_AUDIO
            guard type == expected else { throw invalid("stream \(i) is not \(device.description.mediaType.rawValue)") }
        }
        guard fc.pointee.streams[devices.count]!.pointee.codecpar.pointee.codec_type == AVMEDIA_TYPE_SUBTITLE else {
            throw invalid("stream \(devices.count) is not the record stream")
        }

        // Raw video coded with FFV1 (version 2) is decoded back to the delivered bytes.
        var decoders: [FixtureFFV1Decoder?] = []
        for (i, device) in devices.enumerated() {
            let parameters = fc.pointee.streams[i]!.pointee.codecpar!
            guard parameters.pointee.codec_id == AV_CODEC_ID_FFV1 else { decoders.append(nil); continue }
            guard version >= 2, case .video(let pixelFormat, let size) = device.activeFormat.formatDescription else {
                throw invalid("stream \(i) is FFV1, which a version \(version) fixture of \(device.activeFormat.formatDescription) never holds")
            }
            do throws(FixtureFFV1Decoder.Problem) {
                decoders.append(try FixtureFFV1Decoder(parameters: parameters, pixelFormat: pixelFormat, size: size))
            } catch {
                throw invalid("stream \(i): \(error.message)")
            }
        }

        return try assemble(path: path, version: version, devices: devices, payloads: payloads, decoders: decoders,
                            records: Array(records.dropFirst()))
    }

    private static func assemble(path: String, version: Int, devices: [FixtureDevice], payloads: [[[UInt8]]],
                                 decoders: [FixtureFFV1Decoder?], records: [[String: Any]]) throws(CaptureError) -> FixtureContents {
        func invalid(_ problem: String) -> CaptureError { .invalidFixture(path: path, problem: problem) }
        var samples: [[FixtureSample]] = Array(repeating: [], count: devices.count)
        var changes: [FixtureControlChange] = []
        var ended = false
        for (i, record) in records.enumerated() {
            guard !ended else { throw invalid("record \(i) follows the end record") }
            do throws(FixtureJSON.Problem) {
                if let end = record["end"] {
                    let counts = try FixtureJSON.array(end, "end")
                    guard counts.count == devices.count else { throw FixtureJSON.Problem(field: "end", problem: "expected one count per device") }
                    for (d, c) in counts.enumerated() {
                        let expected = try FixtureJSON.int(c, "end[\(d)]")
                        guard expected == Int64(samples[d].count) else {
                            throw FixtureJSON.Problem(field: "end[\(d)]", problem: "the end record counts \(expected) buffers of stream \(d), the file has \(samples[d].count)")
                        }
                    }
                    ended = true
                } else if let name = record["control"] {
                    let device = Int(try FixtureJSON.int(record["device"], "device"))
                    guard devices.indices.contains(device) else { throw FixtureJSON.Problem(field: "device", problem: "no device \(device)") }
                    changes.append(FixtureControlChange(device: device, presentationTime: try FixtureJSON.time(record["t"], "t"),
                                                        control: ControlID(name: try FixtureJSON.string(name, "control")),
                                                        value: try FixtureJSON.controlValue(record["value"], "value")))
                } else {
                    let device = Int(try FixtureJSON.int(record["s"], "s"))
                    guard devices.indices.contains(device) else { throw FixtureJSON.Problem(field: "s", problem: "no stream \(device)") }
                    let index = samples[device].count
                    guard index < payloads[device].count else {
                        throw FixtureJSON.Problem(field: "s", problem: "buffer \(index) of stream \(device) is missing (truncated)")
                    }
                    var data = payloads[device][index]
                    if let decoder = decoders[device] {
                        do throws(FixtureFFV1Decoder.Problem) {
                            data = try decoder.decode(data)
                        } catch {
                            throw FixtureJSON.Problem(field: "s", problem: "buffer \(index) of stream \(device): \(error.message)")
                        }
                    }
                    let size = try FixtureJSON.int(record["b"], "b"), crc = try FixtureJSON.int(record["c"], "c")
                    guard size == Int64(data.count) else {
                        throw FixtureJSON.Problem(field: "b", problem: "buffer \(index) of stream \(device) has \(data.count) bytes, its record says \(size)")
                    }
                    let actual = CRC32.checksum(data)
                    guard Int64(actual) == crc else {
                        throw FixtureJSON.Problem(field: "c", problem: "buffer \(index) of stream \(device) fails its CRC-32")
                    }
                    try checkSize(data.count, devices[device].activeFormat)
                    let pts = try FixtureJSON.time(record["t"], "t"), duration = try FixtureJSON.time(record["d"], "d")
                    guard pts.isNumeric, duration.isNumeric else { throw FixtureJSON.Problem(field: "t", problem: "a buffer needs a numeric PTS and duration") }
                    var discontinuity: Discontinuity?
                    if let drop = record["drop"] {
                        let pair = try FixtureJSON.array(drop, "drop")
                        guard pair.count == 2 else { throw FixtureJSON.Problem(field: "drop", problem: "expected [count, reason]") }
                        let count = try FixtureJSON.int(pair[0], "drop[0]")
                        guard count > 0, count < Int64(Int32.max) else { throw FixtureJSON.Problem(field: "drop[0]", problem: "count \(count) out of range") }
                        discontinuity = Discontinuity(count: Int(count), reason: try FixtureJSON.enumeration(pair[1], "drop[1]"))
                    }
                    samples[device].append(FixtureSample(device: device, sequenceNumber: try FixtureJSON.int(record["n"], "n"),
                                                         presentationTime: pts, duration: duration, discontinuity: discontinuity, data: data))
                }
            } catch {
                throw invalid("record \(i), field '\(error.field)': \(error.problem)")
            }
        }
        guard ended else {
            throw invalid("truncated: no end record after \(samples.map(\.count).reduce(0, +)) buffers")
        }
        for d in devices.indices where payloads[d].count != samples[d].count {
            throw invalid("stream \(d) has \(payloads[d].count) buffers but \(samples[d].count) records")
        }
        return FixtureContents(version: version, devices: devices, samples: samples, controlChanges: changes)
    }

    /// Raw frames must be exactly one packed frame; audio whole frames; MJPEG non-empty.
    private static func checkSize(_ count: Int, _ format: DeviceFormat) throws(FixtureJSON.Problem) {
        switch format.formatDescription {
        case .video(let pixelFormat, let size):
            if pixelFormat.isCompressed {
                guard count > 0, count <= max(size.width * size.height * 2, 4096) else {
                    throw FixtureJSON.Problem(field: "b", problem: "an MJPEG buffer of \(count) bytes for \(size)")
                }
            } else {
                let expected = pixelFormat.planes(width: size.width, height: size.height).reduce(0) { $0 + $1.bytesPerRow * $1.rows }
                guard count == expected else { throw FixtureJSON.Problem(field: "b", problem: "a \(pixelFormat) \(size) frame needs \(expected) bytes, not \(count)") }
            }
        case .audio(let a):
            guard count > 0, count % a.bytesPerFrame == 0 else {
                throw FixtureJSON.Problem(field: "b", problem: "\(count) bytes are not whole \(a.bytesPerFrame)-byte audio frames")
            }
        }
    }
}
