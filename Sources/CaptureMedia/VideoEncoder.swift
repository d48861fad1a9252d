import CFFmpeg
import CaptureCore

/// Video codecs a movie can be written with.
public enum VideoCodec: String, Sendable, Hashable, CaseIterable {
    /// H.264 through libx264.
    case h264
    /// Motion JPEG through libavcodec's encoder (every frame a JPEG; MOV is its natural home).
    case mjpeg
    /// H.265 through libx265, when libavcodec was built with it (`isAvailable`).
    case hevc

    var encoderName: String {
        switch self {
        case .h264: return "libx264"
        case .mjpeg: return "mjpeg"
        case .hevc: return "libx265"
        }
    }

    /// Whether this FFmpeg build has the encoder.
    public var isAvailable: Bool { avcodec_find_encoder_by_name(encoderName) != nil }
}

/// Settings for the video encoder (libx264 or MJPEG through libavcodec).
public struct VideoEncoderSettings: Sendable, Hashable {
    public enum Preset: String, Sendable, CaseIterable { case ultrafast, superfast, veryfast, faster, fast, medium }

    public var codec: VideoCodec = .h264
    public var dimensions: Dimensions
    /// The pixel format frames arrive in; NV12 and I420 go to x264 as they are, others are converted.
    public var inputPixelFormat: PixelFormat
    /// Nominal time between frames (sets x264's rate control frame rate).
    public var frameDuration: MediaTime
    /// The track's tick, in which `appendVideo` takes its times. Nil: one tick per frame duration
    /// (frame n at tick n). A finer tick (see `TrackTimeBase.fine(for:)`) keeps a device's own,
    /// jittered timestamps in the file instead of snapping them to the frame grid.
    public var timeBase: MediaTime?
    public var preset: Preset = .veryfast
    /// Average bitrate in bits per second; nil means constant quality (CRF).
    public var bitrate: Int?
    public var crf: Int = 23
    /// Frames between keyframes.
    public var keyframeInterval: Int
    /// Pinned so output is identical on every machine (x264's output depends on its thread count).
    public var threads: Int = 2
    /// H.264: the `threads` share each frame (x264's sliced threads) instead of each taking a
    /// frame. Frame threads keep a full frame in flight per thread, about 23 MB apiece at
    /// 3840x2160, so frames of more pixels than 1920x1088 use slices (the default set by `init`):
    /// the ffmpeg CLI's peak RSS for the same 4K ultrafast encode fell 262 → 208 MB at the same
    /// encoding time (measured with /usr/bin/time).
    public var slicedThreads: Bool
    /// H.264/HEVC profile (`baseline`, `main`, `high`…); nil lets the encoder choose.
    public var profile: String?
    /// H.264/HEVC level (`3.1`, `4.0`…); nil = automatic.
    public var level: String?

    public init(dimensions: Dimensions, inputPixelFormat: PixelFormat, frameDuration: MediaTime,
                preset: Preset = .veryfast, bitrate: Int? = nil, keyframeInterval: Int? = nil, codec: VideoCodec = .h264) {
        self.codec = codec
        self.dimensions = dimensions
        slicedThreads = dimensions.width * dimensions.height > 1920 * 1088
        self.inputPixelFormat = inputPixelFormat
        self.frameDuration = frameDuration
        self.preset = preset
        self.bitrate = bitrate
        // Default: a keyframe every 2 s.
        self.keyframeInterval = keyframeInterval ?? max(1, Int((2 / frameDuration.seconds).rounded()))
    }
}

/// H.264 encoding of pixel buffers. Confined to one thread at a time (its writer's lock).
final class VideoEncoder {
    let settings: VideoEncoderSettings
    let owner: CodecContextOwner
    var context: UnsafeMutablePointer<AVCodecContext> { owner.context }
    private let frame: FrameOwner
    private let packet: PacketOwner
    private let encoderPixelFormat: AVPixelFormat
    private let converter: PixelConverter?
    private let convertedPool: PixelBufferPool?
    /// MJPEG input: each frame is decoded to I420 first (with a converter if a JPEG is not 4:2:0).
    private let jpegDecoder: JPEGCodec?
    private var decodedConverter: PixelConverter?
    /// Ticks of the encoder time base per frame, for packet durations (x264 leaves them 0).
    let frameTicks: Int64

    init(settings: VideoEncoderSettings) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        guard let codec = avcodec_find_encoder_by_name(settings.codec.encoderName) else {
            throw .encoderUnavailable(settings.codec.encoderName)
        }
        self.settings = settings
        owner = try CodecContextOwner(codec: codec)
        frame = try FrameOwner()
        packet = try PacketOwner()
        jpegDecoder = settings.inputPixelFormat == .mjpeg ? try JPEGCodec() : nil
        guard let input = jpegDecoder != nil ? AV_PIX_FMT_YUV420P : FFmpeg.pixelFormat(settings.inputPixelFormat) else {
            throw .formatNotSupported("cannot encode \(settings.inputPixelFormat) frames to H.264 (decode them first)")
        }
        // x264 takes NV12 and I420 directly; anything else is converted to I420 once (MJPEG: always I420).
        if settings.codec == .h264 && (input == AV_PIX_FMT_NV12 || input == AV_PIX_FMT_YUV420P) || input == AV_PIX_FMT_YUV420P {
            encoderPixelFormat = input
            converter = nil
            convertedPool = nil
        } else {
            encoderPixelFormat = AV_PIX_FMT_YUV420P
            converter = try PixelConverter(from: settings.inputPixelFormat, settings.dimensions,
                                           to: .yuv420, settings.dimensions)
            convertedPool = PixelBufferPool(format: .yuv420, width: settings.dimensions.width,
                                            height: settings.dimensions.height)
        }
        let c = owner.context
        c.pointee.width = Int32(settings.dimensions.width)
        c.pointee.height = Int32(settings.dimensions.height)
        c.pointee.pix_fmt = encoderPixelFormat
        if settings.codec == .mjpeg {
            // JPEG's full-range expectation; our frames are video range, tagged as such.
            c.pointee.color_range = AVCOL_RANGE_MPEG
            c.pointee.strict_std_compliance = FF_COMPLIANCE_UNOFFICIAL
        }
        let tick = settings.timeBase ?? settings.frameDuration
        c.pointee.time_base = FFmpeg.rational(tick)
        c.pointee.framerate = AVRational(num: settings.frameDuration.timescale, den: Int32(clamping: settings.frameDuration.value))
        c.pointee.gop_size = Int32(settings.keyframeInterval)
        c.pointee.thread_count = Int32(settings.threads)
        c.pointee.flags |= Int32(AV_CODEC_FLAG_BITEXACT)
        if let bitrate = settings.bitrate {
            // x264 and x265 count in kbit/s: below 1000 bit/s they get 0 and refuse to open.
            guard bitrate >= 1000 else {
                throw .invalidArgument("video bitrate \(bitrate) bit/s is below 1000 bit/s, the least the encoders take (they count in kbit/s); give bits per second, e.g. 2000000 for 2 Mbit/s")
            }
            c.pointee.bit_rate = Int64(bitrate)
        }
        frameTicks = TrackTimeBase.ticksPerFrame(settings.frameDuration, in: tick)
    }

    /// Opens the codec; `globalHeader` when the container wants SPS/PPS out of band (MP4/MOV).
    func open(globalHeader: Bool) throws(CaptureError) {
        if globalHeader { context.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        let options: OptionsDictionary
        switch settings.codec {
        case .h264:
            var h264: [(String, String)] = [("preset", settings.preset.rawValue)]
            if settings.bitrate == nil { h264.append(("crf", String(settings.crf))) }
            if let profile = settings.profile { h264.append(("profile", profile)) }
            if let level = settings.level { h264.append(("level", level)) }
            if settings.slicedThreads { h264.append(("x264-params", "sliced-threads=1")) }
            options = OptionsDictionary(h264)
        case .hevc:
            // libx265 logs through its own printf unless told not to; its pools follow `threads`.
            options = OptionsDictionary([("preset", settings.preset.rawValue),
                                         ("x265-params", "log-level=error:pools=\(settings.threads):frame-threads=1")]
                + (settings.bitrate == nil ? [("crf", String(settings.crf))] : [])
                + (settings.profile.map { [("profile", $0)] } ?? []))
            if let level = settings.level, let value = Double(level) { context.pointee.level = Int32((value * 30).rounded()) }
        case .mjpeg:
            // Quality scale 2…31 (lower is better); 3 ≈ JPEG quality 90.
            if settings.bitrate == nil {
                context.pointee.flags |= Int32(AV_CODEC_FLAG_QSCALE)
                context.pointee.global_quality = 3 * FF_QP2LAMBDA
            }
            options = OptionsDictionary([])
        }
        try FFmpeg.check(avcodec_open2(context, context.pointee.codec, &options.pointer), "opening \(settings.codec.encoderName)")
        try FFmpeg.rejectLeftovers(options.pointer, settings.codec.encoderName)
    }

    /// The most frames the encoder has held at once before giving their packets back.
    private(set) var maximumFramesHeld = 0
    private var framesSent = 0
    private var packetsReceived = 0

    /// Sends one frame (PTS in the track's ticks since the file start) and drains packets;
    /// `forceKeyframe` makes the encoder start a keyframe (IDR) at this frame.
    func encode(_ buffer: PixelBuffer, ticks: Int64, forceKeyframe: Bool = false, into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        let source: PixelBuffer
        if let jpegDecoder {
            source = try decodeJPEG(buffer, with: jpegDecoder)
        } else if let converter, let convertedPool {
            guard let converted = convertedPool.makeBuffer() else { throw .invalidState("conversion pool exhausted") }
            try converter.convert(buffer, into: converted)
            source = converted
        } else {
            source = buffer
        }
        let f = frame.frame
        try PixelBufferFrames.wrap(source, avFormat: encoderPixelFormat, into: f)
        f.pointee.pts = ticks
        f.pointee.pict_type = forceKeyframe ? AV_PICTURE_TYPE_I : AV_PICTURE_TYPE_NONE
        let sent = avcodec_send_frame(context, f)
        av_frame_unref(f)
        try FFmpeg.check(sent, "sending a frame to the video encoder")
        framesSent += 1
        maximumFramesHeld = max(maximumFramesHeld, framesSent - packetsReceived)
        try drain(into: sink)
    }

    /// An MJPEG frame as I420 of the encoder's size. A frame that is not one whole JPEG, that
    /// libturbojpeg cannot decode cleanly (a warning such as "premature end of data" counts: the
    /// picture is partly garbage) or whose header says another size throws `invalidCompressedFrame`
    /// before anything reaches the encoder, so the caller can leave that one frame out.
    private func decodeJPEG(_ buffer: PixelBuffer, with decoder: JPEGCodec) throws(CaptureError) -> PixelBuffer {
        let bytes = buffer.withCompressedData { Array($0) }
        if let problem = bytes.withUnsafeBytes({ JPEGFrameCheck.inspect($0).problem }) { throw .invalidCompressedFrame(problem) }
        let decoded: PixelBuffer
        do {
            decoded = try decoder.decode(bytes)
        } catch .codecFailure(_, _, let message) {
            throw .invalidCompressedFrame("libturbojpeg could not decode it (\(message))")
        }
        guard decoded.width == settings.dimensions.width, decoded.height == settings.dimensions.height else {
            throw .invalidCompressedFrame("its header says \(decoded.width)x\(decoded.height), the recording is \(settings.dimensions)")
        }
        if decoded.format == .yuv420 { return decoded }
        if decodedConverter?.source.format != decoded.format {
            decodedConverter = try PixelConverter(from: decoded.format, settings.dimensions, to: .yuv420, settings.dimensions)
        }
        let converted = PixelBuffer(format: .yuv420, width: decoded.width, height: decoded.height)
        try decodedConverter!.convert(decoded, into: converted)
        return converted
    }

    /// Flushes delayed frames at the end of the stream.
    func finish(into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        try FFmpeg.check(avcodec_send_frame(context, nil), "flushing the video encoder")
        try drain(into: sink)
    }

    /// Frees the codec's own state (x264's frame buffers: about 130 MB at 3840x2160) once the
    /// stream is flushed, so it is gone before the file is defragmented and read back. The context
    /// struct stays valid for reads; freeing it again later is harmless.
    func releaseCodec() {
        _ = avcodec_close(context)
    }

    private func drain(into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        while true {
            let r = avcodec_receive_packet(context, packet.packet)
            if r == FFmpeg.eagain || r == FFmpeg.eof { return }
            try FFmpeg.check(r, "receiving a packet from the video encoder")
            packetsReceived += 1
            packet.packet.pointee.duration = frameTicks
            defer { av_packet_unref(packet.packet) }
            try sink(packet.packet)
        }
    }
}

/// Presents a pixel buffer to libav* as an AVFrame without copying: the frame's buffer reference
/// retains the PixelBuffer, which returns to its pool when libav* lets go.
enum PixelBufferFrames {
    static func wrap(_ buffer: PixelBuffer, avFormat: AVPixelFormat, into frame: UnsafeMutablePointer<AVFrame>) throws(CaptureError) {
        frame.pointee.format = avFormat.rawValue
        frame.pointee.width = Int32(buffer.width)
        frame.pointee.height = Int32(buffer.height)
        let opaque = Unmanaged.passRetained(buffer).toOpaque()
        // AVFrame's fields are not const; the encoder only reads a published frame.
        let base = UnsafeMutableRawPointer(mutating: buffer.baseAddress(ofPlane: 0)).assumingMemoryBound(to: UInt8.self)
        let size = buffer.allocationSize
        guard let reference = av_buffer_create(base, size, { opaque, _ in
            if let opaque { Unmanaged<PixelBuffer>.fromOpaque(opaque).release() }
        }, opaque, 0) else {
            Unmanaged<PixelBuffer>.fromOpaque(opaque).release()
            throw .codecFailure(operation: "av_buffer_create", code: -12, message: "out of memory")
        }
        frame.pointee.buf.0 = reference
        withUnsafeMutableBytes(of: &frame.pointee.data) { data in
            let pointers = data.bindMemory(to: UnsafeMutablePointer<UInt8>?.self)
            for plane in 0..<buffer.planeCount {
                pointers[plane] = UnsafeMutableRawPointer(mutating: buffer.baseAddress(ofPlane: plane)).assumingMemoryBound(to: UInt8.self)
            }
        }
        withUnsafeMutableBytes(of: &frame.pointee.linesize) { sizes in
            let values = sizes.bindMemory(to: Int32.self)
            for plane in 0..<buffer.planeCount { values[plane] = Int32(buffer.bytesPerRow[plane]) }
        }
    }
}
