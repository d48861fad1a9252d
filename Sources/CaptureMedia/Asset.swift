import CFFmpeg
import CaptureCore
import Foundation

/// One track of a media file (AVAssetTrack).
public struct AssetTrack: Sendable, Hashable {
    public var trackID: Int
    public var mediaType: MediaType
    /// libavcodec's codec name (`h264`, `aac`, `pcm_s16le`…).
    public var codec: String
    public var duration: MediaTime
    /// Video: the coded size (before the preferred transform).
    public var naturalSize: Dimensions?
    /// Video: frames per second as the file declares them.
    public var nominalFrameRate: Double?
    /// Video: how a player should turn the picture (from the display matrix).
    public var preferredTransform: AffineTransform
    public var sampleRate: Int?
    public var channelCount: Int?
    public var frameCount: Int?
    public var estimatedDataRate: Int?
}

/// A media file's timing and tracks (AVURLAsset), read once through libavformat.
public struct Asset: Sendable, Hashable {
    public let path: String
    public let duration: MediaTime
    public let tracks: [AssetTrack]

    public init(path: String) throws(CaptureError) {
        guard FileManager.default.fileExists(atPath: path) else {
            throw .fileOperationFailed(path: path, reason: "no such file")
        }
        let reader = try MediaFileReader(path: path)
        self.path = path
        let info = reader.info
        duration = info.duration.map { MediaTime(seconds: $0, preferredTimescale: 1_000_000) } ?? .indefinite
        tracks = zip(info.streams, reader.streams).compactMap { (stream, avStream) -> AssetTrack? in
            let type: MediaType
            switch stream.mediaType {
            case "video": type = .video
            case "audio": type = .audio
            default: return nil
            }
            var transform = AffineTransform.identity
            var rate: Double?
            if type == .video {
                let fps = avStream.pointee.avg_frame_rate
                if fps.num > 0, fps.den > 0 { rate = Double(fps.num) / Double(fps.den) }
                if let matrix = av_stream_get_side_data(avStream, AV_PKT_DATA_DISPLAYMATRIX, nil) {
                    let ccw = av_display_rotation_get(UnsafeRawPointer(matrix).assumingMemoryBound(to: Int32.self))
                    if ccw.isFinite { transform = AffineTransform(rotationDegrees: Int(-ccw.rounded())) }
                }
            }
            return AssetTrack(
                trackID: stream.index, mediaType: type, codec: stream.codec,
                duration: stream.duration.map { MediaTime(seconds: $0, preferredTimescale: 1_000_000) } ?? .indefinite,
                naturalSize: stream.width.flatMap { w in stream.height.map { Dimensions(width: w, height: $0) } },
                nominalFrameRate: rate, preferredTransform: transform,
                sampleRate: stream.sampleRate, channelCount: stream.channels, frameCount: stream.frameCount,
                estimatedDataRate: stream.bitrate)
        }
    }

    public func tracks(withMediaType type: MediaType) -> [AssetTrack] { tracks.filter { $0.mediaType == type } }
}

extension PixelBuffer {
    /// An I420 copy of a decoded frame (the frame is only valid inside the reader's callback).
    static func copy(of frame: DecodedVideoFrame) -> PixelBuffer {
        let out = PixelBuffer(format: .yuv420, width: frame.width, height: frame.height)
        for plane in 0..<3 {
            let rows = plane == 0 ? frame.height : (frame.height + 1) / 2
            let bytes = plane == 0 ? frame.width : (frame.width + 1) / 2
            let dst = out.producerBaseAddress(ofPlane: plane)
            for row in 0..<rows {
                (dst + row * out.bytesPerRow[plane]).copyMemory(from: frame.planes[plane] + row * frame.bytesPerRow[plane], byteCount: bytes)
            }
        }
        return out
    }
}

/// Delivers a file's decoded samples in order (AVAssetReader with track outputs): video as I420
/// pixel buffers, audio as interleaved float32 at the track's rate. Confined to one thread at a time.
public final class AssetReader {
    public enum Status: String, Sendable { case unknown, reading, completed, failed }
    public let asset: Asset
    public private(set) var status = Status.unknown
    public private(set) var error: CaptureError?
    private let reader: MediaFileReader
    private var mediaTypes: Set<MediaType> = []
    private var decoders: [Int32: (StreamDecoder, MediaType)] = [:]
    private var queued: [SampleBuffer] = []
    private var packet: PacketOwner?
    private var ended = false

    public init(asset: Asset) throws(CaptureError) {
        self.asset = asset
        reader = try MediaFileReader(path: asset.path)
    }

    /// Reads the tracks of these media types (call before `startReading`).
    public func addOutput(mediaType: MediaType) throws(CaptureError) {
        guard status == .unknown else { throw .invalidState("outputs are added before startReading()") }
        guard !asset.tracks(withMediaType: mediaType).isEmpty else {
            throw .invalidArgument("\(asset.path) has no \(mediaType.rawValue) track")
        }
        mediaTypes.insert(mediaType)
    }

    @discardableResult
    public func startReading() -> Bool {
        guard status == .unknown else { return false }
        do throws(CaptureError) {
            guard !mediaTypes.isEmpty else { throw .invalidState("add an output before startReading()") }
            for stream in reader.streams {
                let type = stream.pointee.codecpar.pointee.codec_type
                let media: MediaType? = type == AVMEDIA_TYPE_VIDEO ? .video : type == AVMEDIA_TYPE_AUDIO ? .audio : nil
                if let media, mediaTypes.contains(media) {
                    do { decoders[stream.pointee.index] = (try StreamDecoder(stream: stream), media) } catch {
                        throw (error as? CaptureError) ?? .formatNotSupported("\(error)")
                    }
                }
            }
            packet = try PacketOwner()
            status = .reading
            return true
        } catch {
            status = .failed
            self.error = error
            return false
        }
    }

    /// The next sample of any selected track in file order; nil at the end (status completed) or on failure.
    public func copyNextSampleBuffer() -> SampleBuffer? {
        guard status == .reading else { return nil }
        do {
            while queued.isEmpty && !ended { try readPacket() }
        } catch {
            status = .failed
            self.error = (error as? CaptureError) ?? .codecFailure(operation: "reading \(asset.path)", code: -1, message: "\(error)")
            return nil
        }
        if queued.isEmpty {
            status = .completed
            return nil
        }
        return queued.removeFirst()
    }

    private func readPacket() throws {
        guard let fc = reader.formatContext, let packet else { ended = true; return }
        let r = av_read_frame(fc, packet.packet)
        if r == FFmpeg.eof {
            for (decoder, _) in decoders.values { try decode(decoder, nil) }
            ended = true
            return
        }
        try FFmpeg.check(r, "reading \(asset.path)")
        defer { av_packet_unref(packet.packet) }
        if let (decoder, _) = decoders[packet.packet.pointee.stream_index] { try decode(decoder, packet.packet) }
    }

    private func decode(_ decoder: StreamDecoder, _ packet: UnsafeMutablePointer<AVPacket>?) throws {
        let index = Int64(queued.count)
        try decoder.decode(packet, video: { frame in
            let pixels = PixelBuffer.copy(of: frame)
            self.queued.append(SampleBuffer(
                payload: .pixels(pixels),
                formatDescription: .video(pixelFormat: .yuv420, dimensions: Dimensions(width: frame.width, height: frame.height)),
                presentationTime: MediaTime(seconds: frame.presentationTime, preferredTimescale: 90_000),
                duration: .invalid, sequenceNumber: index))
        }, audio: { samples, channels, rate, start in
            let format = AudioStreamFormat(sampleRate: rate, channelCount: channels, sampleFormat: .float32)
            let buffer = AudioPCMBuffer(format: format, frameCapacity: samples.count / max(1, channels))
            buffer.withProducerBytes { raw in
                samples.withUnsafeBytes { raw.copyMemory(from: $0) }
            }
            let first = Int64((start * Double(rate)).rounded())
            self.queued.append(SampleBuffer(
                payload: .audio(buffer), formatDescription: .audio(format),
                presentationTime: MediaTime(value: first, timescale: Int32(rate)),
                duration: MediaTime(value: Int64(buffer.frameLength), timescale: Int32(rate)), sequenceNumber: first))
        })
    }
}

/// Still images from a file's video track (AVAssetImageGenerator).
///
/// Tolerances default to infinite (the first decodable frame from the keyframe before the time:
/// fast). Otherwise the first frame whose time lies within [time − before, time + after] is
/// taken, or else the frame on screen at the requested time (the last one not after it); with
/// both zero that is exactly the frame shown at the time. Results come as I420 pixel buffers; `jpegData` encodes one.
public final class ImageGenerator: Sendable {
    public struct Image: Sendable {
        public let pixelBuffer: PixelBuffer
        /// The presentation time of the frame the image comes from.
        public let actualTime: MediaTime
        public let requestedTime: MediaTime
    }

    public let asset: Asset
    private let settings = Locked(Settings())
    private let engine: Locked<SeekingDecoder?>

    struct Settings {
        var maximumSize: Dimensions?
        var appliesPreferredTrackTransform = false
        var toleranceBefore = MediaTime.positiveInfinity
        var toleranceAfter = MediaTime.positiveInfinity
    }

    public init(asset: Asset) throws(CaptureError) {
        guard let track = asset.tracks(withMediaType: .video).first else {
            throw .invalidArgument("\(asset.path) has no video track")
        }
        self.asset = asset
        engine = Locked(try SeekingDecoder(path: asset.path, trackID: track.trackID))
    }

    /// Images are scaled down (aspect kept) to fit this size; nil = the natural size.
    public var maximumSize: Dimensions? {
        get { settings.withLock { $0.maximumSize } }
        set { settings.withLock { $0.maximumSize = newValue } }
    }

    /// Turn images as the track's preferred transform says (e.g. portrait recordings).
    public var appliesPreferredTrackTransform: Bool {
        get { settings.withLock { $0.appliesPreferredTrackTransform } }
        set { settings.withLock { $0.appliesPreferredTrackTransform = newValue } }
    }

    public var requestedTimeToleranceBefore: MediaTime {
        get { settings.withLock { $0.toleranceBefore } }
        set { settings.withLock { $0.toleranceBefore = newValue } }
    }

    public var requestedTimeToleranceAfter: MediaTime {
        get { settings.withLock { $0.toleranceAfter } }
        set { settings.withLock { $0.toleranceAfter = newValue } }
    }

    /// The image at `time` and the time of the frame it shows.
    public func image(at time: MediaTime) async throws(CaptureError) -> Image {
        try generate(at: time)
    }

    /// Images for many times, in the order asked; each result is the image or its error.
    public func images(at times: [MediaTime]) async -> [Result<Image, CaptureError>] {
        times.map { time in Result { () throws(CaptureError) -> Image in try generate(at: time) } }
    }

    /// The image at `time` as JPEG bytes with its actual time.
    public func jpegData(at time: MediaTime, quality: Double = 0.85) async throws(CaptureError) -> (data: [UInt8], actualTime: MediaTime) {
        let image = try generate(at: time)
        return (try JPEGCodec().encode(image.pixelBuffer, quality: quality), image.actualTime)
    }

    func generate(at time: MediaTime) throws(CaptureError) -> Image {
        guard time.isNumeric else { throw .invalidArgument("the requested time must be numeric") }
        let s = settings.withLock { $0 }
        let transform = s.appliesPreferredTrackTransform
            ? asset.tracks(withMediaType: .video).first?.preferredTransform.rightAngleRotation : nil
        let (frame, actual) = try engine.withLock { (decoder: inout SeekingDecoder?) throws(CaptureError) -> (PixelBuffer, Double) in
            guard let decoder else { throw .invalidState("the image generator has no decoder") }
            return try decoder.frame(at: time.seconds, before: s.toleranceBefore.seconds, after: s.toleranceAfter.seconds)
        }
        var image = frame
        if let transform, transform.degrees != 0 || transform.mirrored {
            let size = PixelRotator.rotatedDimensions(Dimensions(width: image.width, height: image.height), angle: transform.degrees)
            let rotated = PixelBuffer(format: .yuv420, width: size.width, height: size.height)
            try PixelRotator.rotate(image, angle: transform.degrees, mirrored: transform.mirrored, into: rotated)
            image = rotated
        }
        if let maximum = s.maximumSize, image.width > maximum.width || image.height > maximum.height {
            let scale = min(Double(maximum.width) / Double(image.width), Double(maximum.height) / Double(image.height))
            let size = Dimensions(width: max(2, Int(Double(image.width) * scale) & ~1), height: max(2, Int(Double(image.height) * scale) & ~1))
            let scaled = PixelBuffer(format: .yuv420, width: size.width, height: size.height)
            try PixelConverter(from: .yuv420, Dimensions(width: image.width, height: image.height), to: .yuv420, size).convert(image, into: scaled)
            image = scaled
        }
        return Image(pixelBuffer: image, actualTime: MediaTime(seconds: actual, preferredTimescale: 90_000), requestedTime: time)
    }
}

/// Seeks a file's video stream and decodes forward to the wanted frame. Confined to its generator's lock.
final class SeekingDecoder {
    private let reader: MediaFileReader
    private let stream: UnsafeMutablePointer<AVStream>
    private let decoder: StreamDecoder
    private let packet: PacketOwner
    /// Half a tick of any sane time base: frame times closer than this are equal.
    private let epsilon = 1e-7

    init(path: String, trackID: Int) throws(CaptureError) {
        reader = try MediaFileReader(path: path)
        guard let stream = reader.streams.first(where: { Int($0.pointee.index) == trackID }) else {
            throw .invalidArgument("\(path) has no track \(trackID)")
        }
        self.stream = stream
        do { decoder = try StreamDecoder(stream: stream) } catch {
            throw (error as? CaptureError) ?? .formatNotSupported("\(error)")
        }
        packet = try PacketOwner()
    }

    /// The frame for `time` within the tolerances (seconds; infinite allowed) and its time.
    func frame(at time: Double, before: Double, after: Double) throws(CaptureError) -> (PixelBuffer, Double) {
        guard let fc = reader.formatContext else { throw .invalidState("the file is closed") }
        let tb = stream.pointee.time_base
        let target = Int64((time * Double(tb.den) / Double(tb.num)).rounded(.down))
        try FFmpeg.check(av_seek_frame(fc, stream.pointee.index, max(0, target), AVSEEK_FLAG_BACKWARD), "seeking to \(time) s")
        avcodec_flush_buffers(decoder.codec.context)
        var candidate: (PixelBuffer, Double)?
        var result: (PixelBuffer, Double)?
        var done = false
        let anyFrame = before.isInfinite && after.isInfinite
        let (low, high) = (time - before - epsilon, time + after + epsilon)
        func consider(_ frame: DecodedVideoFrame) {
            guard !done else { return }
            let t = frame.presentationTime
            if anyFrame || (t >= low && t <= high) {
                result = (PixelBuffer.copy(of: frame), t)  // the first frame within the tolerance
                done = true
            } else if t < time {
                candidate = (PixelBuffer.copy(of: frame), t)
            } else {
                // Past the time: the previous frame is the one on screen at `time`, always acceptable.
                if let c = candidate { result = c } else if t <= high { result = (PixelBuffer.copy(of: frame), t) }
                done = true
            }
        }
        do {
            while !done {
                let r = av_read_frame(fc, packet.packet)
                if r == FFmpeg.eof {
                    try decoder.decode(nil, video: consider, audio: nil)
                    break
                }
                try FFmpeg.check(r, "reading \(reader.path)")
                defer { av_packet_unref(packet.packet) }
                if packet.packet.pointee.stream_index == stream.pointee.index {
                    try decoder.decode(packet.packet, video: consider, audio: nil)
                }
            }
        } catch {
            throw (error as? CaptureError) ?? .codecFailure(operation: "decoding \(reader.path)", code: -1, message: "\(error)")
        }
        if let result { return result }
        if !done, let candidate { return candidate }  // the file ended: its last frame is on screen
        throw .invalidArgument("no frame of \(reader.path) lies within the tolerance around \(time) s")
    }
}
