import CCaptureShims
import CFFmpeg
import CaptureCore
import Logging

/// Turns libav* return codes into typed errors, with FFmpeg's own message.
enum FFmpeg {
    static let eagain = ck_averror_eagain()
    static let eof = ck_averror_eof()
    static let noPTS = ck_av_nopts_value()

    /// Routes FFmpeg's (and through it libx264's) log into swift-log once per process
    /// (`FFmpegLogRouting`): nothing of theirs reaches stderr at CaptureKit's default level.
    static let quietLogs: Void = FFmpegLogRouting.installed

    static func message(_ code: Int32) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        av_strerror(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @discardableResult
    static func check(_ code: Int32, _ operation: @autoclosure () -> String) throws(CaptureError) -> Int32 {
        if code < 0 { throw .codecFailure(operation: operation(), code: code, message: message(code)) }
        return code
    }

    /// For a call that writes through `context`'s AVIOContext: libavformat keeps a refused write in
    /// `pb->error` and carries on, so that is checked first; an I/O failure (`AVERROR(errno)`)
    /// becomes `diskFull`/`writeFailed` for `path`, any other failure `codecFailure`.
    static func checkWrite(_ code: Int32, _ context: UnsafeMutablePointer<AVFormatContext>?, path: String,
                           _ operation: @autoclosure () -> String) throws(CaptureError) {
        let pbError = context?.pointee.pb?.pointee.error ?? 0
        if pbError < 0, -pbError < 4096 { throw .writeError(path: path, errno: -pbError) }
        // Opening the file (no AVIOContext yet) fails with the errno of open(2).
        if code < 0, -code < 4096, context?.pointee.pb == nil { throw .writeError(path: path, errno: -code) }
        try check(code, operation())
    }

    static func rational(_ time: MediaTime) -> AVRational {
        AVRational(num: Int32(clamping: time.value), den: time.timescale)
    }

    /// The AVPixelFormat for a CaptureKit pixel format (nil for compressed formats).
    static func pixelFormat(_ format: PixelFormat) -> AVPixelFormat? {
        switch format {
        case .yuyv: return AV_PIX_FMT_YUYV422
        case .nv12: return AV_PIX_FMT_NV12
        case .yuv420: return AV_PIX_FMT_YUV420P
        case .rgb24: return AV_PIX_FMT_RGB24
        default: return nil
        }
    }

    /// Opens a local file for reading, and nothing else: `protocol_whitelist=file` keeps libavformat
    /// from following a URL in the path or in the file's contents (a playlist naming http://…), so
    /// CaptureKit never opens a network connection (checked by `HostilePathTests`).
    static func openLocalInput(_ context: inout UnsafeMutablePointer<AVFormatContext>?, _ path: String,
                               format: UnsafePointer<AVInputFormat>? = nil) -> Int32 {
        let options = OptionsDictionary([("protocol_whitelist", "file")])
        return avformat_open_input(&context, path, format, &options.pointer)
    }

    /// `avformat_find_stream_info` with single-threaded probe decoders: it decodes a frame or two
    /// to learn the pixel format, and a frame-threaded H.264 decoder allocates a picture per thread
    /// (about 33 MB at 3840x2160, while the recording's own encoder is often still open).
    static func findStreamInfo(_ context: UnsafeMutablePointer<AVFormatContext>?) -> Int32 {
        guard let context else { return -EINVAL }
        let count = Int(context.pointee.nb_streams)
        var options = [OpaquePointer?](repeating: nil, count: max(count, 1))
        for i in 0..<count { av_dict_set(&options[i], "threads", "1", 0) }
        defer { for i in 0..<count { av_dict_free(&options[i]) } }
        return options.withUnsafeMutableBufferPointer { avformat_find_stream_info(context, $0.baseAddress) }
    }

    /// Fails early, naming every unknown option: FFmpeg leaves unknown keys in the dictionary and succeeds.
    static func rejectLeftovers(_ dictionary: OpaquePointer?, _ context: String) throws(CaptureError) {
        guard let dictionary, av_dict_count(dictionary) > 0 else { return }
        var names: [String] = []
        var entry: UnsafeMutablePointer<AVDictionaryEntry>? = nil
        while let e = av_dict_get(dictionary, "", entry, AV_DICT_IGNORE_SUFFIX) {
            names.append(String(cString: e.pointee.key))
            entry = e
        }
        throw .invalidArgument("\(context) does not know the option(s) \(names.joined(separator: ", "))")
    }
}

/// An owned AVDictionary of options, freed once.
final class OptionsDictionary {
    var pointer: OpaquePointer? = nil

    init(_ options: [(String, String)]) {
        for (key, value) in options { av_dict_set(&pointer, key, value, 0) }
    }

    deinit { av_dict_free(&pointer) }
}

/// One AVFrame, freed exactly once.
final class FrameOwner {
    // Confined to the encoder or decoder that owns it.
    let frame: UnsafeMutablePointer<AVFrame>

    init() throws(CaptureError) {
        guard let frame = av_frame_alloc() else { throw .codecFailure(operation: "av_frame_alloc", code: -12, message: "out of memory") }
        self.frame = frame
    }

    deinit {
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
    }
}

/// One AVPacket, freed exactly once.
final class PacketOwner {
    // Confined to the encoder or demuxer that owns it.
    let packet: UnsafeMutablePointer<AVPacket>

    init() throws(CaptureError) {
        guard let packet = av_packet_alloc() else { throw .codecFailure(operation: "av_packet_alloc", code: -12, message: "out of memory") }
        self.packet = packet
    }

    deinit {
        var p: UnsafeMutablePointer<AVPacket>? = packet
        av_packet_free(&p)
    }
}

/// One AVCodecContext, freed exactly once.
final class CodecContextOwner {
    // Confined to the encoder or decoder that owns it.
    let context: UnsafeMutablePointer<AVCodecContext>

    init(codec: UnsafePointer<AVCodec>) throws(CaptureError) {
        guard let context = avcodec_alloc_context3(codec) else {
            throw .codecFailure(operation: "avcodec_alloc_context3", code: -12, message: "out of memory")
        }
        self.context = context
    }

    deinit {
        var c: UnsafeMutablePointer<AVCodecContext>? = context
        avcodec_free_context(&c)
    }
}

/// FFmpeg's `av_log` → the `capturekit.ffmpeg` logger, one step down (see `CaptureLogging`), with
/// libavutil's own threshold kept at the lowest FFmpeg level that would still be printed.
public enum FFmpegLogRouting {
    /// Installs the callback (once) and follows `CaptureLogging.level`.
    public static let installed: Void = {
        ck_log_route_ffmpeg { level, line in
            guard let line else { return }
            CaptureLogging.logger(.ffmpeg).log(level: FFmpegLogRouting.level(ffmpeg: level), "\(String(cString: line))")
        }
        CaptureLogging.observeLevel { level in av_log_set_level(FFmpegLogRouting.threshold(for: level)) }
    }()

    /// The swift-log level an FFmpeg message of `ffmpeg` (AV_LOG_*) level is logged at.
    public static func level(ffmpeg: Int32) -> Logger.Level {
        switch ffmpeg {
        case ...AV_LOG_PANIC: return .critical
        case ...AV_LOG_FATAL: return .error
        case ...AV_LOG_ERROR: return .notice
        case ...AV_LOG_WARNING: return .info
        case ...AV_LOG_INFO: return .debug
        default: return .trace
        }
    }

    /// The highest AV_LOG_* level whose messages `level` lets through.
    public static func threshold(for level: Logger.Level) -> Int32 {
        switch level {
        case .critical: return AV_LOG_PANIC
        case .error, .warning: return AV_LOG_FATAL
        case .notice: return AV_LOG_ERROR
        case .info: return AV_LOG_WARNING
        case .debug: return AV_LOG_INFO
        case .trace: return AV_LOG_DEBUG
        }
    }
}
