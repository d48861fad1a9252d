import CFFmpeg
import CaptureCore

/// What a media file holds, as libavformat sees it.
public struct MediaFileInfo: Sendable, Codable, Equatable {
    public struct Stream: Sendable, Codable, Equatable {
        public var index: Int
        public var mediaType: String
        public var codec: String
        public var width: Int?
        public var height: Int?
        public var pixelFormat: String?
        public var sampleRate: Int?
        public var channels: Int?
        public var frameCount: Int?
        public var duration: Double?
        public var bitrate: Int?
    }

    public var formatName: String
    public var duration: Double?
    public var streams: [Stream]
}

/// One decoded video frame as 8-bit I420 planes, valid only inside the reader's callback.
public struct DecodedVideoFrame {
    public let presentationTime: Double
    public let width: Int
    public let height: Int
    /// Y, U, V plane base addresses and their strides.
    public let planes: [UnsafePointer<UInt8>]
    public let bytesPerRow: [Int]

    /// The luma plane as a buffer of `bytesPerRow[0] × height` bytes.
    public var luma: UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: planes[0], count: bytesPerRow[0] * height)
    }
}

/// Opens a media file and decodes it: used to verify recordings and by `capture inspect`.
/// Confined to one thread at a time.
public final class MediaFileReader {
    public let path: String
    private(set) var formatContext: UnsafeMutablePointer<AVFormatContext>?

    public init(path: String) throws(CaptureError) {
        _ = FFmpeg.quietLogs
        self.path = path
        try InputFile.requireRegular(path, what: "a media file")
        var context: UnsafeMutablePointer<AVFormatContext>? = nil
        try FFmpeg.check(FFmpeg.openLocalInput(&context, path), "opening \(path)")
        formatContext = context
        try FFmpeg.check(FFmpeg.findStreamInfo(context), "reading stream info of \(path)")
    }

    deinit { avformat_close_input(&formatContext) }

    var streams: [UnsafeMutablePointer<AVStream>] {
        guard let fc = formatContext else { return [] }
        return (0..<Int(fc.pointee.nb_streams)).compactMap { fc.pointee.streams[$0] }
    }

    public var info: MediaFileInfo {
        guard let fc = formatContext else { return MediaFileInfo(formatName: "", duration: nil, streams: []) }
        let infoStreams = streams.map { stream -> MediaFileInfo.Stream in
            let par = stream.pointee.codecpar!.pointee
            let tb = stream.pointee.time_base
            let isVideo = par.codec_type == AVMEDIA_TYPE_VIDEO
            let isAudio = par.codec_type == AVMEDIA_TYPE_AUDIO
            let duration = stream.pointee.duration > 0 ? Double(stream.pointee.duration) * Double(tb.num) / Double(tb.den) : nil
            return MediaFileInfo.Stream(
                index: Int(stream.pointee.index),
                mediaType: isVideo ? "video" : isAudio ? "audio" : "other",
                codec: String(cString: avcodec_get_name(par.codec_id)),
                width: isVideo ? Int(par.width) : nil,
                height: isVideo ? Int(par.height) : nil,
                pixelFormat: isVideo ? av_get_pix_fmt_name(AVPixelFormat(rawValue: par.format)).map { String(cString: $0) } : nil,
                sampleRate: isAudio ? Int(par.sample_rate) : nil,
                channels: isAudio ? Int(par.ch_layout.nb_channels) : nil,
                frameCount: stream.pointee.nb_frames > 0 ? Int(stream.pointee.nb_frames) : nil,
                duration: duration,
                bitrate: par.bit_rate > 0 ? Int(par.bit_rate) : nil)
        }
        let duration = fc.pointee.duration > 0 ? Double(fc.pointee.duration) / Double(AV_TIME_BASE) : nil
        return MediaFileInfo(formatName: String(cString: fc.pointee.iformat.pointee.name), duration: duration, streams: infoStreams)
    }

    /// Decodes every video frame (as I420) and all audio (as interleaved float at the stream's rate),
    /// in file order, calling back for each. Audio arrives with its start time in seconds.
    public func decode(video onVideo: ((DecodedVideoFrame) throws -> Void)?,
                       audio onAudio: ((_ samples: [Float], _ channels: Int, _ sampleRate: Int, _ startTime: Double) throws -> Void)?) throws {
        guard let fc = formatContext else { return }
        var decoders: [Int32: StreamDecoder] = [:]
        for stream in streams {
            let type = stream.pointee.codecpar.pointee.codec_type
            if (type == AVMEDIA_TYPE_VIDEO && onVideo != nil) || (type == AVMEDIA_TYPE_AUDIO && onAudio != nil) {
                decoders[stream.pointee.index] = try StreamDecoder(stream: stream)
            }
        }
        let packet = try PacketOwner()
        while true {
            let r = av_read_frame(fc, packet.packet)
            if r == FFmpeg.eof { break }
            try FFmpeg.check(r, "reading \(path)")
            defer { av_packet_unref(packet.packet) }
            if let decoder = decoders[packet.packet.pointee.stream_index] {
                try decoder.decode(packet.packet, video: onVideo, audio: onAudio)
            }
        }
        for decoder in decoders.values { try decoder.decode(nil, video: onVideo, audio: onAudio) }
    }
}

/// The first packet of a file that does not read or decode cleanly.
public struct DecodeDamage: Sendable, Codable, Equatable {
    /// What went wrong, in FFmpeg's words or ours.
    public var problem: String
    /// The stream the packet belongs to (nil: the container itself could not be read further).
    public var stream: Int?
    public var mediaType: String?
    /// The packet's number within its stream (0-based).
    public var packet: Int?
    /// The packet's presentation time, seconds.
    public var time: Double?
    /// Where the packet (or the unreadable part) starts in the file.
    public var byteOffset: Int64?
    /// The demuxer found the packet cut short: the file ends inside it.
    public var packetCutShort: Bool
}

/// What `decodeUntilDamage` found.
public struct DecodeOutcome: Sendable, Equatable {
    /// nil when every packet read and decoded cleanly.
    public var damage: DecodeDamage?
    /// Packets that could still be read after the damage (not decoded).
    public var packetsAfterDamage = 0
}

extension MediaFileReader {
    /// Silences libav*'s own log (the process-wide level): for tools that report problems
    /// themselves, such as `capture inspect`.
    public static func silenceLibraryLogs() {
        _ = FFmpeg.quietLogs  // set once per process (lazily): it must not undo this later
        av_log_set_level(AV_LOG_QUIET)
    }

    /// Decodes like `decode`, but strictly (decoders stop at any bitstream error instead of hiding
    /// it, a concealed frame counts as damaged) and without throwing for the file's own faults:
    /// decoding stops at the first packet that is cut short, unreadable or undecodable, the
    /// callbacks having seen only what came before it, and the rest of the file is only counted.
    /// Throws what the callbacks throw, or when no decoder can be opened.
    public func decodeUntilDamage(video onVideo: ((DecodedVideoFrame) throws -> Void)?,
                                  audio onAudio: ((_ samples: [Float], _ channels: Int, _ sampleRate: Int, _ startTime: Double) throws -> Void)?)
        throws -> DecodeOutcome {
        guard let fc = formatContext else { return DecodeOutcome() }
        var decoders: [Int32: StreamDecoder] = [:]
        for stream in streams {
            let type = stream.pointee.codecpar.pointee.codec_type
            if (type == AVMEDIA_TYPE_VIDEO && onVideo != nil) || (type == AVMEDIA_TYPE_AUDIO && onAudio != nil) {
                decoders[stream.pointee.index] = try StreamDecoder(stream: stream, strict: true)
            }
        }
        var outcome = DecodeOutcome()
        var counts = [Int](repeating: 0, count: streams.count)
        let packet = try PacketOwner()
        let p = packet.packet
        while true {
            let position = fc.pointee.pb.map { avio_tell($0) }
            let r = av_read_frame(fc, p)
            if r == FFmpeg.eof { break }
            if r < 0 {
                if outcome.damage == nil {
                    outcome.damage = DecodeDamage(problem: "reading the file failed: \(FFmpeg.message(r))", byteOffset: position,
                                                  packetCutShort: false)
                }
                break
            }
            defer { av_packet_unref(p) }
            let index = Int(p.pointee.stream_index)
            guard counts.indices.contains(index) else { continue }
            let number = counts[index]
            counts[index] += 1
            if outcome.damage != nil {
                outcome.packetsAfterDamage += 1
                continue
            }
            let cutShort = p.pointee.flags & AV_PKT_FLAG_CORRUPT != 0
            func damage(_ problem: String) -> DecodeDamage {
                let stream = streams[index]
                let tb = stream.pointee.time_base
                let pts = p.pointee.pts != FFmpeg.noPTS ? p.pointee.pts : p.pointee.dts
                let type = stream.pointee.codecpar.pointee.codec_type
                return DecodeDamage(problem: problem, stream: index,
                                    mediaType: type == AVMEDIA_TYPE_VIDEO ? "video" : type == AVMEDIA_TYPE_AUDIO ? "audio" : "other",
                                    packet: number, time: pts == FFmpeg.noPTS ? nil : Double(pts) * Double(tb.num) / Double(tb.den),
                                    byteOffset: p.pointee.pos >= 0 ? p.pointee.pos : position, packetCutShort: cutShort)
            }
            if cutShort {
                outcome.damage = damage("the packet is cut short (\(p.pointee.size) bytes read): the file ends inside it, or its data is missing")
                continue
            }
            guard let decoder = decoders[p.pointee.stream_index] else { continue }
            do {
                try decoder.decode(p, video: onVideo, audio: onAudio)
            } catch let error as StreamDecoder.Damaged {
                outcome.damage = damage(error.problem)
            }
        }
        // Frames still inside the decoders came from packets before any damage.
        for (index, decoder) in decoders where index != Int32(outcome.damage?.stream ?? -1) {
            do {
                try decoder.decode(nil, video: onVideo, audio: onAudio)
            } catch let error as StreamDecoder.Damaged {
                if outcome.damage == nil {
                    outcome.damage = DecodeDamage(problem: error.problem, stream: Int(index), packetCutShort: false)
                }
            }
        }
        return outcome
    }
}

/// Decodes one stream; converts frames to I420 / interleaved float. Confined to its reader's thread.
final class StreamDecoder {
    let stream: UnsafeMutablePointer<AVStream>
    let codec: CodecContextOwner
    let frame: FrameOwner
    var scaler: OpaquePointer?
    var converted: PixelBuffer?
    var resampler: OpaquePointer?

    /// A decoder error in strict mode: the packet's data is damaged (not a programming error).
    struct Damaged: Error {
        let problem: String
    }

    /// Strict: stop at any bitstream error (AV_EF_EXPLODE) and treat concealed frames as damage.
    let strict: Bool

    init(stream: UnsafeMutablePointer<AVStream>, strict: Bool = false) throws {
        self.strict = strict
        self.stream = stream
        guard let decoder = avcodec_find_decoder(stream.pointee.codecpar.pointee.codec_id) else {
            throw CaptureError.formatNotSupported("no decoder for \(String(cString: avcodec_get_name(stream.pointee.codecpar.pointee.codec_id)))")
        }
        codec = try CodecContextOwner(codec: decoder)
        frame = try FrameOwner()
        try FFmpeg.check(avcodec_parameters_to_context(codec.context, stream.pointee.codecpar), "configuring a decoder")
        codec.context.pointee.pkt_timebase = stream.pointee.time_base
        codec.context.pointee.thread_count = 1
        if strict { codec.context.pointee.err_recognition |= AV_EF_EXPLODE | AV_EF_CRCCHECK }
        try FFmpeg.check(avcodec_open2(codec.context, decoder, nil), "opening a decoder")
    }

    private var codecName: String { String(cString: avcodec_get_name(codec.context.pointee.codec_id)) }

    deinit {
        sws_freeContext(scaler)
        swr_free(&resampler)
    }

    func decode(_ packet: UnsafeMutablePointer<AVPacket>?,
                video: ((DecodedVideoFrame) throws -> Void)?,
                audio: (([Float], Int, Int, Double) throws -> Void)?) throws {
        let sent = avcodec_send_packet(codec.context, packet)
        if strict, sent < 0, sent != FFmpeg.eof, sent != FFmpeg.eagain {
            throw Damaged(problem: "the \(codecName) decoder refused the packet: \(FFmpeg.message(sent))")
        }
        if sent != FFmpeg.eof { try FFmpeg.check(sent, "decoding a packet") }
        while true {
            let r = avcodec_receive_frame(codec.context, frame.frame)
            if r == FFmpeg.eagain || r == FFmpeg.eof { return }
            if strict, r < 0 { throw Damaged(problem: "the \(codecName) decoder failed: \(FFmpeg.message(r))") }
            try FFmpeg.check(r, "receiving a decoded frame")
            defer { av_frame_unref(frame.frame) }
            if strict, frame.frame.pointee.decode_error_flags != 0 || frame.frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0 {
                throw Damaged(problem: "the \(codecName) decoder had to conceal errors in a frame (flags \(frame.frame.pointee.decode_error_flags))")
            }
            let tb = stream.pointee.time_base
            let pts = frame.frame.pointee.best_effort_timestamp
            let seconds = pts == FFmpeg.noPTS ? 0 : Double(pts) * Double(tb.num) / Double(tb.den)
            if codec.context.pointee.codec_type == AVMEDIA_TYPE_VIDEO, let video {
                try deliverVideo(seconds, video)
            } else if let audio {
                try deliverAudio(seconds, audio)
            }
        }
    }

    private func deliverVideo(_ seconds: Double, _ callback: (DecodedVideoFrame) throws -> Void) throws {
        let f = frame.frame.pointee
        let width = Int(f.width), height = Int(f.height)
        let planes: [UnsafePointer<UInt8>]
        let strides: [Int]
        if f.format == AV_PIX_FMT_YUV420P.rawValue || f.format == AV_PIX_FMT_YUVJ420P.rawValue {
            planes = [UnsafePointer(f.data.0!), UnsafePointer(f.data.1!), UnsafePointer(f.data.2!)]
            strides = [Int(f.linesize.0), Int(f.linesize.1), Int(f.linesize.2)]
        } else {
            if converted == nil || converted!.width != width || converted!.height != height {
                converted = PixelBuffer(format: .yuv420, width: width, height: height)
                sws_freeContext(scaler)
                scaler = sws_getContext(f.width, f.height, AVPixelFormat(rawValue: f.format), f.width, f.height,
                                        AV_PIX_FMT_YUV420P, SWS_BICUBIC | SWS_BITEXACT, nil, nil, nil)
            }
            guard let scaler, let out = converted else { throw CaptureError.formatNotSupported("cannot convert decoded frames to I420") }
            var src = frame.frame.pointee.data
            var srcStride = frame.frame.pointee.linesize
            var dst: [UnsafeMutablePointer<UInt8>?] = (0..<3).map { out.producerBaseAddress(ofPlane: $0).assumingMemoryBound(to: UInt8.self) } + [nil]
            var dstStride: [Int32] = (0..<3).map { Int32(out.bytesPerRow[$0]) } + [0]
            _ = withUnsafePointer(to: &src) { s in
                withUnsafePointer(to: &srcStride) { ss in
                    s.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) { sp in
                        ss.withMemoryRebound(to: Int32.self, capacity: 8) { ssp in
                            sws_scale(scaler, sp, ssp, 0, f.height, &dst, &dstStride)
                        }
                    }
                }
            }
            planes = (0..<3).map { UnsafePointer(out.baseAddress(ofPlane: $0).assumingMemoryBound(to: UInt8.self)) }
            strides = out.bytesPerRow
        }
        try callback(DecodedVideoFrame(presentationTime: seconds, width: width, height: height, planes: planes, bytesPerRow: strides))
    }

    private func deliverAudio(_ seconds: Double, _ callback: ([Float], Int, Int, Double) throws -> Void) throws {
        let f = frame.frame
        let channels = Int(f.pointee.ch_layout.nb_channels)
        let rate = Int(f.pointee.sample_rate)
        if resampler == nil {
            var layout = AVChannelLayout()
            av_channel_layout_default(&layout, Int32(channels))
            defer { av_channel_layout_uninit(&layout) }
            try FFmpeg.check(swr_alloc_set_opts2(&resampler, &layout, AV_SAMPLE_FMT_FLT, Int32(rate),
                                                 &f.pointee.ch_layout, AVSampleFormat(rawValue: f.pointee.format), Int32(rate), 0, nil),
                             "configuring audio conversion")
            try FFmpeg.check(swr_init(resampler), "initialising audio conversion")
        }
        let count = Int(f.pointee.nb_samples)
        var samples = [Float](repeating: 0, count: count * channels)
        let produced = samples.withUnsafeMutableBytes { raw -> Int32 in
            var out: [UnsafeMutablePointer<UInt8>?] = [raw.baseAddress!.assumingMemoryBound(to: UInt8.self)]
            let input = UnsafeMutableRawPointer(f.pointee.extended_data!).assumingMemoryBound(to: UnsafePointer<UInt8>?.self)
            return swr_convert(resampler, &out, Int32(count), input, Int32(count))
        }
        try FFmpeg.check(produced, "converting decoded audio")
        try callback(Array(samples.prefix(Int(produced) * channels)), channels, rate, seconds)
    }
}
