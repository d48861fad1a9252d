import CFFmpeg
import CaptureCore
import Foundation

/// An output AVFormatContext and its file, closed and freed exactly once.
final class MuxerOwner {
    let context: UnsafeMutablePointer<AVFormatContext>

    init(format: String, path: String) throws(CaptureError) {
        var context: UnsafeMutablePointer<AVFormatContext>? = nil
        try FFmpeg.check(avformat_alloc_output_context2(&context, nil, format, path), "creating a \(format) muxer")
        guard let context else { throw .codecFailure(operation: "avformat_alloc_output_context2", code: -12, message: "out of memory") }
        self.context = context
    }

    deinit {
        if context.pointee.pb != nil { avio_closep(&context.pointee.pb) }
        avformat_free_context(context)
    }
}

/// Writes a fixture (layout: `FixtureFormat`). Confined to one thread at a time: its owner
/// (`FixtureRecordingOutput`) calls it under a lock.
public final class FixtureWriter {
    public let path: String
    public let devices: [FixtureDevice]
    private let muxer: MuxerOwner
    private let packet: PacketOwner
    private var lastDTS: [Int64]
    private var counts: [Int]
    private var origin: MediaTime?
    private var finished = false
    private let eventStream: Int32
    /// Per device: the FFV1 encoder of a raw video stream (nil: bytes stored as delivered).
    private var encoders: [FixtureFFV1Encoder?] = []
    /// Buffers written so far, over all devices.
    public var sampleCount: Int { counts.reduce(0, +) }

    /// Creates the file; `formatVersion` is written into it as is (tests write other versions).
    public init(path: String, devices: [FixtureDevice], formatVersion: Int = FixtureFormat.version) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        guard !devices.isEmpty else { throw .noInputs }
        try OutputPath.checkNew(path)
        self.path = path
        self.devices = devices
        muxer = try MuxerOwner(format: "nut", path: path)
        packet = try PacketOwner()
        lastDTS = Array(repeating: Int64.min, count: devices.count + 1)
        counts = Array(repeating: 0, count: devices.count)
        eventStream = Int32(devices.count)
        let fc = muxer.context
        for device in devices {
            guard let stream = avformat_new_stream(fc, nil) else { throw .codecFailure(operation: "avformat_new_stream", code: -12, message: "out of memory") }
            stream.pointee.time_base = AVRational(num: 1, den: FixtureFormat.nanoseconds)
            let par = stream.pointee.codecpar!
            switch device.activeFormat.formatDescription {
            case .video(let pixelFormat, let size):
                par.pointee.codec_type = AVMEDIA_TYPE_VIDEO
                par.pointee.width = Int32(size.width)
                par.pointee.height = Int32(size.height)
                if pixelFormat == .mjpeg {
                    par.pointee.codec_id = AV_CODEC_ID_MJPEG
                } else if formatVersion >= 2, let encoder = try FixtureFFV1Encoder(pixelFormat: pixelFormat, size: size) {
                    try encoder.describe(par)
                    encoders.append(encoder)
                    continue
                } else if let av = FFmpeg.pixelFormat(pixelFormat) {
                    par.pointee.codec_id = AV_CODEC_ID_RAWVIDEO
                    par.pointee.format = av.rawValue
                } else {
                    throw .formatNotSupported("a fixture cannot hold \(pixelFormat) video")
                }
            case .audio(let format):
                par.pointee.codec_type = AVMEDIA_TYPE_AUDIO
                par.pointee.codec_id = format.sampleFormat == .int16 ? AV_CODEC_ID_PCM_S16LE : AV_CODEC_ID_PCM_F32LE
                par.pointee.sample_rate = Int32(format.sampleRate)
                av_channel_layout_default(&par.pointee.ch_layout, Int32(format.channelCount))
            }
            encoders.append(nil)
        }
        guard let events = avformat_new_stream(fc, nil) else { throw .codecFailure(operation: "avformat_new_stream", code: -12, message: "out of memory") }
        events.pointee.time_base = AVRational(num: 1, den: FixtureFormat.nanoseconds)
        events.pointee.codecpar.pointee.codec_type = AVMEDIA_TYPE_SUBTITLE
        events.pointee.codecpar.pointee.codec_id = AV_CODEC_ID_TEXT

        let profile = FixtureJSON.encode(devices)
        av_dict_set(&fc.pointee.metadata, FixtureFormat.versionKey, String(formatVersion), 0)
        fc.pointee.flags |= AVFMT_FLAG_BITEXACT
        // Claimed outside the clean-up below: a failed claim means the file there is not ours.
        let claimed = try OutputPath.claimKeepingOpen(path)
        defer { close(claimed) }
        do {
            // Opened through the descriptor (OutputPath.openPath), never by name again: a link or
            // file put at the path after the claim is not written through.
            try FFmpeg.checkWrite(avio_open(&fc.pointee.pb, OutputPath.openPath(claimed), AVIO_FLAG_WRITE), fc, path: path, "opening \(path)")
            try FFmpeg.checkWrite(avformat_write_header(fc, nil), fc, path: path, "writing the fixture header")
            // The profile is the first record: NUT's demuxer keeps metadata values to 1 KiB only.
            try writeRecord(["profile": profile], time: 0)
        } catch {
            OutputPath.removeRegularFile(path)
            throw error
        }
    }

    static func json(_ object: Any) throws(CaptureError) -> String {
        do {
            let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
            return String(decoding: data, as: UTF8.self)
        } catch {
            throw .invalidArgument("fixture record is not valid JSON: \(error)")
        }
    }

    private func nanoseconds(_ t: MediaTime) -> Int64 {
        guard let origin, t.isNumeric else { return 0 }
        let d = t - origin
        return av_rescale(d.value, Int64(FixtureFormat.nanoseconds), Int64(d.timescale))
    }

    /// Writes one packet; timestamps are kept strictly increasing per stream (the records hold the exact ones).
    private func write(stream: Int32, bytes: UnsafeRawBufferPointer, time: Int64, duration: Int64) throws(CaptureError) {
        let p = packet.packet
        try FFmpeg.check(av_new_packet(p, Int32(bytes.count)), "allocating a fixture packet")
        if let base = bytes.baseAddress, bytes.count > 0 { p.pointee.data.update(from: base.assumingMemoryBound(to: UInt8.self), count: bytes.count) }
        let dts = max(time, lastDTS[Int(stream)] == Int64.min ? time : lastDTS[Int(stream)] + 1)
        lastDTS[Int(stream)] = dts
        p.pointee.pts = dts
        p.pointee.dts = dts
        p.pointee.duration = max(duration, 0)
        p.pointee.stream_index = stream
        p.pointee.flags |= AV_PKT_FLAG_KEY
        let r = av_interleaved_write_frame(muxer.context, p)
        av_packet_unref(p)
        try FFmpeg.checkWrite(r, muxer.context, path: path, "writing a fixture packet")
    }

    private func writeRecord(_ record: [String: Any], time: Int64) throws(CaptureError) {
        let text = try Self.json(record)
        try Array(text.utf8).withRawBytes { raw throws(CaptureError) in
            try write(stream: eventStream, bytes: raw, time: time, duration: 0)
        }
    }

    /// A buffer's facts and bytes, copied out of its `SampleBuffer` so the device's buffer can go
    /// back at once while the (slower) CRC, FFV1 coding and muxing happen later.
    public struct Buffer: Sendable {
        public var formatDescription: FormatDescription
        public var presentationTime: MediaTime
        public var duration: MediaTime
        public var sequenceNumber: Int64
        public var discontinuity: Discontinuity?
        /// Compressed data, tightly packed planes, or interleaved PCM, as delivered.
        public var bytes: [UInt8]

        public init(_ sample: SampleBuffer) {
            formatDescription = sample.formatDescription
            presentationTime = sample.presentationTime
            duration = sample.duration
            sequenceNumber = sample.sequenceNumber
            discontinuity = sample.discontinuity
            bytes = FixtureWriter.bytes(of: sample)
        }
    }

    /// Appends a buffer of device `device` exactly as delivered.
    public func append(_ sample: SampleBuffer, device: Int) throws(CaptureError) {
        try append(Buffer(sample), device: device)
    }

    /// Appends a buffer copied out earlier (`Buffer(sample)`).
    public func append(_ sample: Buffer, device: Int) throws(CaptureError) {
        guard !finished else { throw .invalidState("the fixture \(path) is already finished") }
        guard devices.indices.contains(device) else { throw .invalidArgument("no device \(device) in this fixture") }
        guard sample.presentationTime.isNumeric else { throw .invalidArgument("a sample without a numeric PTS") }
        guard sample.formatDescription == devices[device].activeFormat.formatDescription else {
            throw .formatNotSupported("\(sample.formatDescription) in a fixture stream of \(devices[device].activeFormat.formatDescription)")
        }
        if origin == nil { origin = sample.presentationTime }
        let bytes = sample.bytes
        let crc = CRC32.checksum(bytes)
        let time = nanoseconds(sample.presentationTime)
        let duration = sample.duration.isNumeric
            ? av_rescale(sample.duration.value, Int64(FixtureFormat.nanoseconds), Int64(sample.duration.timescale)) : 0
        var record: [String: Any] = ["s": device, "n": sample.sequenceNumber, "t": FixtureJSON.time(sample.presentationTime),
                                     "d": FixtureJSON.time(sample.duration), "b": bytes.count, "c": Int64(crc)]
        if let drop = sample.discontinuity { record["drop"] = [drop.count, drop.reason.rawValue] as [Any] }
        try writeRecord(record, time: time)
        var stored = bytes
        if let encoder = encoders[device] {
            try bytes.withRawBytes { raw throws(CaptureError) in stored = try encoder.encode(raw) }
        }
        try stored.withRawBytes { raw throws(CaptureError) in
            try write(stream: Int32(device), bytes: raw, time: time, duration: duration)
        }
        counts[device] += 1
    }

    /// Records a control change at a PTS (on the samples' clock).
    public func appendControlChange(_ change: FixtureControlChange) throws(CaptureError) {
        guard !finished else { throw .invalidState("the fixture \(path) is already finished") }
        guard devices.indices.contains(change.device) else { throw .invalidArgument("no device \(change.device) in this fixture") }
        if origin == nil { origin = change.presentationTime }
        try writeRecord(["control": change.control.description, "device": change.device,
                         "t": FixtureJSON.time(change.presentationTime), "value": FixtureJSON.value(change.value)],
                        time: nanoseconds(change.presentationTime))
    }

    /// Writes the end record and the trailer; the file is complete only after this.
    public func finish() throws(CaptureError) {
        guard !finished else { return }
        finished = true
        let end = lastDTS.filter { $0 != Int64.min }.max() ?? 0
        try writeRecord(["end": counts], time: end)
        try FFmpeg.checkWrite(av_write_trailer(muxer.context), muxer.context, path: path, "writing the fixture trailer")
        // The last buffered bytes reach the OS here: a refusal now still means a cut fixture.
        avio_flush(muxer.context.pointee.pb)
        try FFmpeg.checkWrite(0, muxer.context, path: path, "flushing the fixture")
        avio_closep(&muxer.context.pointee.pb)
    }

    /// The buffer's bytes as delivered: compressed data, tightly packed planes, or interleaved PCM.
    static func bytes(of sample: SampleBuffer) -> [UInt8] {
        switch sample.payload {
        case .audio(let buffer):
            return buffer.withBytes { Array($0.prefix(buffer.byteCount)) }
        case .pixels(let buffer):
            if buffer.format.isCompressed { return buffer.withCompressedData { Array($0) } }
            var out: [UInt8] = []
            let geometry = buffer.format.planes(width: buffer.width, height: buffer.height)
            out.reserveCapacity(geometry.reduce(0) { $0 + $1.bytesPerRow * $1.rows })
            for (plane, g) in geometry.enumerated() {
                buffer.withPlane(plane) { raw in
                    for row in 0..<g.rows {
                        let start = row * buffer.bytesPerRow[plane]
                        out.append(contentsOf: raw[start..<start + g.bytesPerRow])
                    }
                }
            }
            return out
        }
    }
}
