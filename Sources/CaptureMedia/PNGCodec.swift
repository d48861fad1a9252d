import CFFmpeg
import CaptureCore

/// PNG through libavcodec's own `png` encoder and decoder (no extra library): RGB24 pictures in
/// and out, for plots and other drawn images that must stay exact (JPEG would smear thin lines).
public enum PNGCodec {
    /// An RGB24 picture: `pixels` holds `width * height * 3` bytes, rows top to bottom, no padding.
    public struct Picture: Sendable, Equatable {
        public var width: Int
        public var height: Int
        public var pixels: [UInt8]
        public init(width: Int, height: Int, pixels: [UInt8]) {
            self.width = width; self.height = height; self.pixels = pixels
        }
        /// The (r, g, b) at column `x`, row `y`; nil outside the picture.
        public func rgb(x: Int, y: Int) -> (UInt8, UInt8, UInt8)? {
            guard x >= 0, y >= 0, x < width, y < height else { return nil }
            let i = (y * width + x) * 3
            return (pixels[i], pixels[i + 1], pixels[i + 2])
        }
    }

    /// Encodes `picture` (RGB24) as one PNG file's bytes.
    public static func encode(_ picture: Picture) throws(CaptureError) -> [UInt8] {
        guard picture.width > 0, picture.height > 0, picture.width <= 16_384, picture.height <= 16_384,
              picture.pixels.count == picture.width * picture.height * 3 else {
            throw .invalidArgument("a PNG picture needs 1…16384 pixels a side and width × height × 3 RGB bytes "
                                   + "(got \(picture.width)x\(picture.height), \(picture.pixels.count) bytes)")
        }
        guard let encoder = avcodec_find_encoder(AV_CODEC_ID_PNG) else {
            throw .encoderUnavailable("this libavcodec has no PNG encoder (install a full libavcodec build)")
        }
        let codec = try CodecContextOwner(codec: encoder)
        let frame = try FrameOwner()
        let packet = try PacketOwner()
        let c = codec.context
        c.pointee.width = Int32(picture.width)
        c.pointee.height = Int32(picture.height)
        c.pointee.pix_fmt = AV_PIX_FMT_RGB24
        c.pointee.time_base = AVRational(num: 1, den: 1)
        c.pointee.thread_count = 1
        c.pointee.flags |= AV_CODEC_FLAG_BITEXACT
        try FFmpeg.check(avcodec_open2(c, encoder, nil), "opening the PNG encoder")
        let f = frame.frame
        f.pointee.format = AV_PIX_FMT_RGB24.rawValue
        f.pointee.width = Int32(picture.width)
        f.pointee.height = Int32(picture.height)
        f.pointee.pts = 0
        try FFmpeg.check(av_frame_get_buffer(f, 0), "allocating a PNG frame")
        let stride = Int(f.pointee.linesize.0)
        let rowBytes = picture.width * 3
        picture.pixels.withUnsafeBytes { source in
            for row in 0..<picture.height {
                UnsafeMutableRawPointer(f.pointee.data.0! + row * stride)
                    .copyMemory(from: source.baseAddress! + row * rowBytes, byteCount: rowBytes)
            }
        }
        try FFmpeg.check(avcodec_send_frame(c, f), "encoding a PNG picture")
        try FFmpeg.check(avcodec_send_frame(c, nil), "flushing the PNG encoder")
        let r = avcodec_receive_packet(c, packet.packet)
        guard r >= 0 else { throw .codecFailure(operation: "the PNG encoder returned no picture", code: r, message: FFmpeg.message(r)) }
        defer { av_packet_unref(packet.packet) }
        return Array(UnsafeBufferPointer(start: packet.packet.pointee.data, count: Int(packet.packet.pointee.size)))
    }

    /// Decodes one 8-bit RGB PNG file's bytes (what `encode` writes).
    public static func decode(_ bytes: [UInt8]) throws(CaptureError) -> Picture {
        guard !bytes.isEmpty, bytes.count < Int(Int32.max) - 64 else { throw .invalidArgument("no PNG bytes to decode") }
        guard let decoder = avcodec_find_decoder(AV_CODEC_ID_PNG) else {
            throw .formatNotSupported("this libavcodec has no PNG decoder")
        }
        let codec = try CodecContextOwner(codec: decoder)
        let frame = try FrameOwner()
        let packet = try PacketOwner()
        codec.context.pointee.thread_count = 1
        try FFmpeg.check(avcodec_open2(codec.context, decoder, nil), "opening the PNG decoder")
        try FFmpeg.check(av_new_packet(packet.packet, Int32(bytes.count)), "allocating a PNG packet")
        defer { av_packet_unref(packet.packet) }
        bytes.withUnsafeBytes { UnsafeMutableRawPointer(packet.packet.pointee.data!).copyMemory(from: $0.baseAddress!, byteCount: bytes.count) }
        try FFmpeg.check(avcodec_send_packet(codec.context, packet.packet), "decoding a PNG picture")
        try FFmpeg.check(avcodec_send_packet(codec.context, nil), "flushing the PNG decoder")
        try FFmpeg.check(avcodec_receive_frame(codec.context, frame.frame), "receiving the decoded PNG picture")
        let f = frame.frame
        let width = Int(f.pointee.width), height = Int(f.pointee.height)
        guard f.pointee.format == AV_PIX_FMT_RGB24.rawValue, width > 0, height > 0 else {
            throw .formatNotSupported("only 8-bit RGB PNG pictures are read back (this one has libav pixel format \(f.pointee.format))")
        }
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        let stride = Int(f.pointee.linesize.0)
        pixels.withUnsafeMutableBytes { out in
            for row in 0..<height {
                (out.baseAddress! + row * width * 3).copyMemory(from: f.pointee.data.0! + row * stride, byteCount: width * 3)
            }
        }
        return Picture(width: width, height: height, pixels: pixels)
    }
}
