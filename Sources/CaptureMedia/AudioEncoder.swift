import CFFmpeg
import CaptureCore

/// Audio codecs a file can be written with.
public enum AudioCodec: String, Sendable, Hashable, CaseIterable, Codable {
    /// AAC-LC through FFmpeg's native `aac` encoder.
    case aac
    /// Linear PCM, signed 16-bit little-endian (WAV's and MOV's usual PCM).
    case pcmS16 = "pcm_s16le"
    /// Linear PCM, 32-bit float little-endian.
    case pcmFloat32 = "pcm_f32le"

    var encoderName: String { self == .aac ? "aac" : rawValue }
    public var isPCM: Bool { self != .aac }
}

/// Settings for the audio encoder (FFmpeg's native `aac`, or linear PCM).
public struct AudioEncoderSettings: Sendable, Hashable {
    public var codec: AudioCodec = .aac
    public var input: AudioStreamFormat
    public var sampleRate: Int
    public var channelCount: Int
    public var bitrate: Int

    public init(input: AudioStreamFormat, sampleRate: Int? = nil, channelCount: Int? = nil, bitrate: Int? = nil,
                codec: AudioCodec = .aac) {
        self.codec = codec
        self.input = input
        self.sampleRate = sampleRate ?? input.sampleRate
        self.channelCount = channelCount ?? input.channelCount
        self.bitrate = bitrate ?? 64_000 * (channelCount ?? input.channelCount)
    }
}

/// AAC (or PCM) encoding of PCM buffers: resample to planar float, cut into the encoder's
/// 1024-sample frames (PCM: 1024 too), stamp each frame with its sample count; PCM encoders get
/// the samples interleaved in their own format. Confined to one thread at a time.
final class AudioEncoder {
    let settings: AudioEncoderSettings
    let owner: CodecContextOwner
    var context: UnsafeMutablePointer<AVCodecContext> { owner.context }
    private let resampler: AudioResampler
    private let frame: FrameOwner
    private let packet: PacketOwner
    private var pending: [[Float]]
    private var samplesSent: Int64 = 0
    private var frameSize = 1024

    init(settings: AudioEncoderSettings) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        guard let codec = avcodec_find_encoder_by_name(settings.codec.encoderName) else {
            throw .encoderUnavailable(settings.codec.encoderName)
        }
        self.settings = settings
        owner = try CodecContextOwner(codec: codec)
        frame = try FrameOwner()
        packet = try PacketOwner()
        resampler = try AudioResampler(input: settings.input, outputSampleRate: settings.sampleRate,
                                       outputChannels: settings.channelCount)
        pending = Array(repeating: [], count: settings.channelCount)
        let c = owner.context
        c.pointee.sample_fmt = Self.sampleFormat(settings.codec)
        c.pointee.sample_rate = Int32(settings.sampleRate)
        av_channel_layout_default(&c.pointee.ch_layout, Int32(settings.channelCount))
        if settings.codec == .aac { c.pointee.bit_rate = Int64(settings.bitrate) }
        c.pointee.time_base = AVRational(num: 1, den: Int32(settings.sampleRate))
        c.pointee.flags |= Int32(AV_CODEC_FLAG_BITEXACT)
    }

    private static func sampleFormat(_ codec: AudioCodec) -> AVSampleFormat {
        switch codec {
        case .aac: return AV_SAMPLE_FMT_FLTP
        case .pcmS16: return AV_SAMPLE_FMT_S16
        case .pcmFloat32: return AV_SAMPLE_FMT_FLT
        }
    }

    func open(globalHeader: Bool) throws(CaptureError) {
        if globalHeader { context.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        try FFmpeg.check(avcodec_open2(context, context.pointee.codec, nil), "opening the \(settings.codec.encoderName) encoder")
        // PCM encoders take any frame size (0): keep 1024-sample frames for them too.
        if context.pointee.frame_size > 0 { frameSize = Int(context.pointee.frame_size) }
    }

    /// Samples encoded so far (at the encoder's rate).
    var encodedSampleCount: Int64 { samplesSent }

    func encode(_ buffer: AudioPCMBuffer, into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        append(try resampler.convert(buffer))
        try sendFullFrames(into: sink)
    }

    /// Encodes what is left (a short last frame) and flushes the encoder.
    func finish(into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        append(try resampler.flush())
        try sendFullFrames(into: sink)
        if let count = pending.first?.count, count > 0 { try send(count: count, into: sink) }
        try FFmpeg.check(avcodec_send_frame(context, nil), "flushing the \(settings.codec.encoderName) encoder")
        try drain(into: sink)
    }

    private func append(_ channels: [[Float]]) {
        for c in 0..<min(channels.count, pending.count) { pending[c] += channels[c] }
    }

    private func sendFullFrames(into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        while let count = pending.first?.count, count >= frameSize {
            try send(count: frameSize, into: sink)
        }
    }

    private func send(count: Int, into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        let f = frame.frame
        f.pointee.nb_samples = Int32(count)
        f.pointee.format = Self.sampleFormat(settings.codec).rawValue
        f.pointee.sample_rate = Int32(settings.sampleRate)
        try FFmpeg.check(av_channel_layout_copy(&f.pointee.ch_layout, &context.pointee.ch_layout), "copying the channel layout")
        try FFmpeg.check(av_frame_get_buffer(f, 0), "allocating an audio frame")
        defer { av_frame_unref(f) }
        let planes = UnsafeMutableRawPointer(f.pointee.extended_data!)
            .assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
        let channels = settings.channelCount
        for c in 0..<channels {
            pending[c].withUnsafeBufferPointer { source in
                switch settings.codec {
                case .aac:
                    UnsafeMutableRawPointer(planes[c]!).assumingMemoryBound(to: Float.self)
                        .update(from: source.baseAddress!, count: count)
                case .pcmFloat32:
                    let out = UnsafeMutableRawPointer(planes[0]!).assumingMemoryBound(to: Float.self)
                    for i in 0..<count { out[i * channels + c] = source[i] }
                case .pcmS16:
                    // As libswresample converts: round(x · 32768), clipped; exact for samples that came from s16.
                    let out = UnsafeMutableRawPointer(planes[0]!).assumingMemoryBound(to: Int16.self)
                    for i in 0..<count {
                        out[i * channels + c] = Int16(max(-32768, min(32767, (source[i] * 32768).rounded())))
                    }
                }
            }
            pending[c].removeFirst(count)
        }
        f.pointee.pts = samplesSent
        samplesSent += Int64(count)
        try FFmpeg.check(avcodec_send_frame(context, f), "sending audio to the \(settings.codec.encoderName) encoder")
        try drain(into: sink)
    }

    private func drain(into sink: (UnsafeMutablePointer<AVPacket>) throws(CaptureError) -> Void) throws(CaptureError) {
        while true {
            let r = avcodec_receive_packet(context, packet.packet)
            if r == FFmpeg.eagain || r == FFmpeg.eof { return }
            try FFmpeg.check(r, "receiving a packet from the \(settings.codec.encoderName) encoder")
            defer { av_packet_unref(packet.packet) }
            try sink(packet.packet)
        }
    }
}
