import CCaptureShims
import CFFmpeg
import CaptureCore

/// How a fixture (version 2+) stores raw video losslessly: FFV1 on a planar layout that holds the
/// delivered bytes exactly. Each mapping is a byte shuffle, so packing back gives the very bytes
/// that were delivered (the reader checks each buffer's CRC-32 against them):
/// - YUYV (packed 4:2:2) ↔ yuv422p: Y0 U Y1 V → the Y, U and V planes;
/// - NV12 ↔ yuv420p: the interleaved UV plane → U and V planes;
/// - I420 ↔ yuv420p as is;
/// - RGB24 ↔ bgr0 (the fourth byte is zero on write and ignored on read).
/// Odd widths or heights, and other formats, stay `rawvideo` (packed planes, as in version 1).
enum FixtureLosslessLayout {
    /// The planar pixel format FFV1 codes for `format`, or nil when the frame stays rawvideo.
    static func planarFormat(for format: PixelFormat, size: Dimensions) -> AVPixelFormat? {
        guard size.width % 2 == 0, size.height % 2 == 0, size.width > 0, size.height > 0 else { return nil }
        switch format {
        case .yuyv: return AV_PIX_FMT_YUV422P
        case .nv12, .yuv420: return AV_PIX_FMT_YUV420P
        case .rgb24: return AV_PIX_FMT_BGR0
        default: return nil
        }
    }

    /// Packed delivered bytes → the planes of `frame` (allocated with the planar format).
    static func unpack(_ bytes: UnsafeRawBufferPointer, format: PixelFormat, size: Dimensions, into frame: UnsafeMutablePointer<AVFrame>) {
        let w = size.width, h = size.height, cw = w / 2, ch = h / 2
        let src = bytes.bindMemory(to: UInt8.self)
        let f = frame.pointee
        func plane(_ i: Int) -> (UnsafeMutablePointer<UInt8>, Int) {
            let data = withUnsafeBytes(of: f.data) { $0.load(fromByteOffset: i * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride, as: UnsafeMutablePointer<UInt8>?.self) }
            let line = withUnsafeBytes(of: f.linesize) { $0.load(fromByteOffset: i * MemoryLayout<Int32>.stride, as: Int32.self) }
            return (data!, Int(line))
        }
        let base = src.baseAddress!
        switch format {
        case .yuyv:
            let (y, ys) = plane(0), (u, us) = plane(1), (v, vs) = plane(2)
            ck_unpack_yuyv(base, y, ys, u, us, v, vs, Int32(w), Int32(h))
        case .nv12, .yuv420:
            let (y, ys) = plane(0), (u, us) = plane(1), (v, vs) = plane(2)
            for row in 0..<h { (y + row * ys).update(from: base + row * w, count: w) }
            let chroma = w * h
            if format == .nv12 {
                ck_unpack_nv12_chroma(base + chroma, u, us, v, vs, Int32(cw), Int32(ch))
            } else {
                for row in 0..<ch {
                    (u + row * us).update(from: base + chroma + row * cw, count: cw)
                    (v + row * vs).update(from: base + chroma + cw * ch + row * cw, count: cw)
                }
            }
        default: // .rgb24 → bgr0
            let (p, ps) = plane(0)
            ck_unpack_rgb24_to_bgr0(base, p, ps, Int32(w), Int32(h))
        }
    }

    /// The planes of a decoded `frame` → the packed bytes as delivered.
    static func pack(_ frame: UnsafePointer<AVFrame>, format: PixelFormat, size: Dimensions) -> [UInt8] {
        let w = size.width, h = size.height, cw = w / 2, ch = h / 2
        let f = frame.pointee
        func plane(_ i: Int) -> (UnsafePointer<UInt8>, Int) {
            let data = withUnsafeBytes(of: f.data) { $0.load(fromByteOffset: i * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride, as: UnsafeMutablePointer<UInt8>?.self) }
            let line = withUnsafeBytes(of: f.linesize) { $0.load(fromByteOffset: i * MemoryLayout<Int32>.stride, as: Int32.self) }
            return (UnsafePointer(data!), Int(line))
        }
        let total = format.planes(width: w, height: h).reduce(0) { $0 + $1.bytesPerRow * $1.rows }
        return [UInt8](unsafeUninitializedCapacity: total) { out, count in
            let base = out.baseAddress!
            switch format {
            case .yuyv:
                let (y, ys) = plane(0), (u, us) = plane(1), (v, vs) = plane(2)
                ck_pack_yuyv(y, ys, u, us, v, vs, base, Int32(w), Int32(h))
            case .nv12, .yuv420:
                let (y, ys) = plane(0), (u, us) = plane(1), (v, vs) = plane(2)
                for row in 0..<h { (base + row * w).update(from: y + row * ys, count: w) }
                let chroma = w * h
                if format == .nv12 {
                    ck_pack_nv12_chroma(u, us, v, vs, base + chroma, Int32(cw), Int32(ch))
                } else {
                    for row in 0..<ch {
                        (base + chroma + row * cw).update(from: u + row * us, count: cw)
                        (base + chroma + cw * ch + row * cw).update(from: v + row * vs, count: cw)
                    }
                }
            default:
                let (p, ps) = plane(0)
                ck_pack_bgr0_to_rgb24(p, ps, base, Int32(w), Int32(h))
            }
            count = total
        }
    }
}

/// FFV1 encoder for one fixture stream: level 3 (per-slice CRCs), range coder with the large
/// context model, every frame a keyframe, one thread (the same bytes on every machine).
final class FixtureFFV1Encoder {
    let pixelFormat: PixelFormat
    let size: Dimensions
    private let codec: CodecContextOwner
    private let frame: FrameOwner
    private let packet: PacketOwner

    init?(pixelFormat: PixelFormat, size: Dimensions) throws(CaptureError) {
        guard let planar = FixtureLosslessLayout.planarFormat(for: pixelFormat, size: size) else { return nil }
        guard let encoder = avcodec_find_encoder(AV_CODEC_ID_FFV1) else {
            throw .formatNotSupported("this libavcodec has no FFV1 encoder, which fixtures use for raw video")
        }
        self.pixelFormat = pixelFormat
        self.size = size
        codec = try CodecContextOwner(codec: encoder)
        frame = try FrameOwner()
        packet = try PacketOwner()
        let c = codec.context
        c.pointee.width = Int32(size.width)
        c.pointee.height = Int32(size.height)
        c.pointee.pix_fmt = planar
        c.pointee.time_base = AVRational(num: 1, den: FixtureFormat.nanoseconds)
        c.pointee.gop_size = 1
        c.pointee.thread_count = 1
        c.pointee.level = 3
        c.pointee.flags |= AV_CODEC_FLAG_BITEXACT
        let options = OptionsDictionary([("coder", "range_tab"), ("context", "1"), ("slicecrc", "1")])
        try FFmpeg.check(avcodec_open2(c, encoder, &options.pointer), "opening the FFV1 encoder")
        try FFmpeg.rejectLeftovers(options.pointer, "the FFV1 encoder")
        frame.frame.pointee.format = planar.rawValue
        frame.frame.pointee.width = Int32(size.width)
        frame.frame.pointee.height = Int32(size.height)
        try FFmpeg.check(av_frame_get_buffer(frame.frame, 0), "allocating an FFV1 frame")
    }

    /// Fills the stream's codec parameters (codec, size, pixel format, the level-3 header as extradata).
    func describe(_ parameters: UnsafeMutablePointer<AVCodecParameters>) throws(CaptureError) {
        try FFmpeg.check(avcodec_parameters_from_context(parameters, codec.context), "describing the FFV1 stream")
    }

    /// One packed frame (exactly as delivered) → one FFV1 packet.
    func encode(_ bytes: UnsafeRawBufferPointer) throws(CaptureError) -> [UInt8] {
        try FFmpeg.check(av_frame_make_writable(frame.frame), "reusing the FFV1 frame")
        FixtureLosslessLayout.unpack(bytes, format: pixelFormat, size: size, into: frame.frame)
        try FFmpeg.check(avcodec_send_frame(codec.context, frame.frame), "encoding a fixture frame with FFV1")
        let r = avcodec_receive_packet(codec.context, packet.packet)
        guard r >= 0 else {
            throw .codecFailure(operation: "FFV1 returned no packet for a fixture frame", code: r, message: FFmpeg.message(r))
        }
        defer { av_packet_unref(packet.packet) }
        return Array(UnsafeBufferPointer(start: packet.packet.pointee.data, count: Int(packet.packet.pointee.size)))
    }
}

/// FFV1 decoder for one fixture stream; every failure is a `Problem` the reader turns into `invalidFixture`.
final class FixtureFFV1Decoder {
    struct Problem: Error { var message: String }

    let pixelFormat: PixelFormat
    let size: Dimensions
    private let planar: AVPixelFormat
    private let codec: CodecContextOwner
    private let frame: FrameOwner
    private let packet: PacketOwner

    /// `parameters`: the stream's, already checked to be FFV1 of `size`.
    init(parameters: UnsafePointer<AVCodecParameters>, pixelFormat: PixelFormat, size: Dimensions) throws(Problem) {
        guard let planar = FixtureLosslessLayout.planarFormat(for: pixelFormat, size: size) else {
            throw Problem(message: "\(pixelFormat) \(size) is never stored as FFV1")
        }
        guard parameters.pointee.width == Int32(size.width), parameters.pointee.height == Int32(size.height) else {
            throw Problem(message: "the FFV1 stream is \(parameters.pointee.width)x\(parameters.pointee.height), the device format \(size)")
        }
        guard let decoder = avcodec_find_decoder(AV_CODEC_ID_FFV1) else { throw Problem(message: "this libavcodec has no FFV1 decoder") }
        self.pixelFormat = pixelFormat
        self.size = size
        self.planar = planar
        do {
            codec = try CodecContextOwner(codec: decoder)
            frame = try FrameOwner()
            packet = try PacketOwner()
        } catch {
            throw Problem(message: "\(error)")
        }
        let c = codec.context
        guard avcodec_parameters_to_context(c, parameters) >= 0 else { throw Problem(message: "its FFV1 parameters are unusable") }
        c.pointee.thread_count = 1
        c.pointee.err_recognition |= AV_EF_CRCCHECK | AV_EF_EXPLODE
        let r = avcodec_open2(c, decoder, nil)
        guard r >= 0 else { throw Problem(message: "its FFV1 header does not open (\(FFmpeg.message(r)))") }
    }

    /// One FFV1 packet → the packed frame as delivered.
    func decode(_ bytes: [UInt8]) throws(Problem) -> [UInt8] {
        guard !bytes.isEmpty else { throw Problem(message: "an empty FFV1 packet") }
        let p = packet.packet
        guard av_new_packet(p, Int32(bytes.count)) >= 0 else { throw Problem(message: "out of memory") }
        defer { av_packet_unref(p) }
        bytes.withUnsafeBufferPointer { p.pointee.data.update(from: $0.baseAddress!, count: bytes.count) }
        p.pointee.flags |= AV_PKT_FLAG_KEY
        let sent = avcodec_send_packet(codec.context, p)
        guard sent >= 0 else { throw Problem(message: "FFV1 refused the packet (\(FFmpeg.message(sent)))") }
        let received = avcodec_receive_frame(codec.context, frame.frame)
        guard received >= 0 else { throw Problem(message: "FFV1 decoded no frame (\(FFmpeg.message(received)))") }
        defer { av_frame_unref(frame.frame) }
        let f = frame.frame.pointee
        guard f.width == Int32(size.width), f.height == Int32(size.height), f.format == planar.rawValue else {
            throw Problem(message: "FFV1 decoded a \(f.width)x\(f.height) frame of pixel format \(f.format), not \(size)")
        }
        if f.decode_error_flags != 0 || f.flags & AV_FRAME_FLAG_CORRUPT != 0 {
            throw Problem(message: "FFV1 reports a damaged frame")
        }
        return FixtureLosslessLayout.pack(frame.frame, format: pixelFormat, size: size)
    }
}
