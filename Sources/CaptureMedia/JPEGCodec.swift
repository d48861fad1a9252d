import CTurboJPEG
import CaptureCore

/// JPEG through libturbojpeg: compression straight from YUV planes (no RGB detour) and decoding.
/// A handle is confined to one thread at a time.
public final class JPEGCodec {
    private let compressor: tjhandle
    private let decompressor: tjhandle
    private var nv12Converter: PixelConverter?
    private var scratch: PixelBuffer?

    public init() throws(CaptureError) {
        guard let c = tjInitCompress(), let d = tjInitDecompress() else {
            throw .codecFailure(operation: "tjInit", code: -1, message: "libturbojpeg could not create a handle")
        }
        compressor = c
        decompressor = d
    }

    deinit {
        tjDestroy(compressor)
        tjDestroy(decompressor)
    }

    private func failure(_ handle: tjhandle, _ operation: String) -> CaptureError {
        .codecFailure(operation: operation, code: -1, message: String(cString: tjGetErrorStr2(handle)))
    }

    /// Compresses an I420 or NV12 frame (NV12 is de-interleaved once through libswscale) at `quality` 0…1.
    public func encode(_ buffer: PixelBuffer, quality: Double) throws(CaptureError) -> [UInt8] {
        guard (0...1).contains(quality) else { throw .invalidArgument("JPEG quality \(quality) is outside 0.0–1.0") }
        let source: PixelBuffer
        switch buffer.format {
        case .yuv420: source = buffer
        case .nv12, .yuyv:
            let size = Dimensions(width: buffer.width, height: buffer.height)
            if nv12Converter?.source.format != buffer.format || nv12Converter?.source.dimensions != size {
                nv12Converter = try PixelConverter(from: buffer.format, size, to: .yuv420, size)
                scratch = PixelBuffer(format: .yuv420, width: buffer.width, height: buffer.height)
            }
            try nv12Converter!.convert(buffer, into: scratch!)
            source = scratch!
        default:
            throw .formatNotSupported("JPEG encoding takes I420, NV12 or YUYV frames, not \(buffer.format)")
        }
        var planes: [UnsafePointer<UInt8>?] = (0..<3).map { UnsafePointer(source.baseAddress(ofPlane: $0).assumingMemoryBound(to: UInt8.self)) }
        var strides: [Int32] = (0..<3).map { Int32(source.bytesPerRow[$0]) }
        var output: UnsafeMutablePointer<UInt8>? = nil
        var size: UInt = 0
        let q = Int32((quality * 100).rounded())
        let r = tjCompressFromYUVPlanes(compressor, &planes, Int32(source.width), &strides, Int32(source.height),
                                        Int32(TJSAMP_420.rawValue), &output, &size, max(1, q), 0)
        defer { tjFree(output) }
        guard r == 0, let output else { throw failure(compressor, "tjCompressFromYUVPlanes") }
        return Array(UnsafeBufferPointer(start: output, count: Int(size)))
    }

    /// The largest frame `decode` accepts: 16384 pixels a side, 64 Mpx.
    public static let maximumDimension = 16_384
    public static let maximumPixels = 64_000_000

    /// Decodes a JPEG: to I420 when it is 4:2:0, otherwise to packed RGB.
    public func decode(_ data: [UInt8]) throws(CaptureError) -> PixelBuffer {
        var width: Int32 = 0, height: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let header = data.withUnsafeBufferPointer {
            tjDecompressHeader3(decompressor, $0.baseAddress, UInt($0.count), &width, &height, &subsampling, &colorspace)
        }
        guard header == 0, width > 0, height > 0 else { throw failure(decompressor, "tjDecompressHeader3 (not a valid JPEG)") }
        // A damaged or hostile header can claim any size (65535x65535 asks for 12 GB): refuse before
        // allocating. No camera CaptureKit records from comes near the limit (8K UHD is 33 Mpx).
        guard Int(width) <= Self.maximumDimension, Int(height) <= Self.maximumDimension,
              Int(width) * Int(height) <= Self.maximumPixels else {
            throw .invalidCompressedFrame("the JPEG claims \(width)x\(height) pixels, more than the \(Self.maximumDimension) per side and \(Self.maximumPixels / 1_000_000) Mpx a frame may have")
        }
        if subsampling == Int32(TJSAMP_420.rawValue), width % 2 == 0, height % 2 == 0 {
            let out = PixelBuffer(format: .yuv420, width: Int(width), height: Int(height))
            var planes: [UnsafeMutablePointer<UInt8>?] = (0..<3).map { out.producerBaseAddress(ofPlane: $0).assumingMemoryBound(to: UInt8.self) }
            var strides: [Int32] = (0..<3).map { Int32(out.bytesPerRow[$0]) }
            let r = data.withUnsafeBufferPointer {
                tjDecompressToYUVPlanes(decompressor, $0.baseAddress, UInt($0.count), &planes, width, &strides, height, 0)
            }
            guard r == 0 else { throw failure(decompressor, "tjDecompressToYUVPlanes") }
            return out
        }
        let out = PixelBuffer(format: .rgb24, width: Int(width), height: Int(height))
        let r = data.withUnsafeBufferPointer {
            tjDecompress2(decompressor, $0.baseAddress, UInt($0.count), out.producerBaseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self),
                          width, Int32(out.bytesPerRow[0]), height, Int32(TJPF_RGB.rawValue), 0)
        }
        guard r == 0 else { throw failure(decompressor, "tjDecompress2") }
        return out
    }
}

/// The simulator's MJPEG formats through libturbojpeg: `FrameCompressor` over a small set of
/// `JPEGCodec` handles (a handle is used by one thread at a time; streams borrow one per frame).
public final class JPEGFrameCompressor: FrameCompressor {
    /// JPEG quality 0…1 (0.9 keeps the frame stamp and flat colours clean).
    public let quality: Double
    private let idle = Locked<[IdleCodec]>([])

    public init(quality: Double = 0.9) {
        self.quality = quality
    }

    public func compress(_ frame: PixelBuffer, into output: PixelBuffer) throws(CaptureError) {
        guard output.format == .mjpeg, output.width == frame.width, output.height == frame.height else {
            throw .invalidArgument("JPEG compression needs an MJPEG output of \(frame.width)x\(frame.height), not \(output.format) \(output.width)x\(output.height)")
        }
        let codec: JPEGCodec
        if let reused = idle.withLock({ $0.popLast() }) { codec = reused.codec } else { codec = try JPEGCodec() }
        defer { idle.withLock { $0.append(IdleCodec(codec: codec)) } }
        let bytes = try codec.encode(frame, quality: quality)
        try bytes.withRawBytes { raw throws(CaptureError) in try output.setCompressedData(raw) }
    }

    /// A handle in the idle pool. @unchecked: a pooled handle belongs to no thread; the one that
    /// takes it out of the pool is its only user until it puts it back.
    private struct IdleCodec: @unchecked Sendable { let codec: JPEGCodec }  // unchecked: one user at a time (taken from the pool)
}
