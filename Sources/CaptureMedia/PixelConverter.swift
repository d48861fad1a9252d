import CFFmpeg
import CaptureCore

/// Pixel format and size conversion through libswscale, between pixel buffers.
/// Confined to one thread at a time.
public final class PixelConverter {
    public let source: (format: PixelFormat, dimensions: Dimensions)
    public let destination: (format: PixelFormat, dimensions: Dimensions)
    private let context: OpaquePointer

    public init(from sourceFormat: PixelFormat, _ sourceSize: Dimensions,
                to destinationFormat: PixelFormat, _ destinationSize: Dimensions) throws(CaptureError) {
        guard let src = FFmpeg.pixelFormat(sourceFormat), let dst = FFmpeg.pixelFormat(destinationFormat) else {
            throw .formatNotSupported("libswscale cannot convert \(sourceFormat) to \(destinationFormat)")
        }
        // Bicubic for resizing; exact same-size format changes need no filter choice.
        guard let context = sws_getContext(Int32(sourceSize.width), Int32(sourceSize.height), src,
                                           Int32(destinationSize.width), Int32(destinationSize.height), dst,
                                           SWS_BICUBIC | SWS_ACCURATE_RND | SWS_BITEXACT, nil, nil, nil) else {
            throw .formatNotSupported("libswscale has no path from \(sourceFormat) \(sourceSize) to \(destinationFormat) \(destinationSize)")
        }
        self.context = context
        source = (sourceFormat, sourceSize)
        destination = (destinationFormat, destinationSize)
    }

    deinit { sws_freeContext(context) }

    public func convert(_ input: PixelBuffer, into output: PixelBuffer) throws(CaptureError) {
        guard input.format == source.format, input.width == source.dimensions.width, input.height == source.dimensions.height,
              output.format == destination.format, output.width == destination.dimensions.width,
              output.height == destination.dimensions.height else {
            throw .invalidArgument("buffers do not match the converter (\(source.format) \(source.dimensions) → \(destination.format) \(destination.dimensions))")
        }
        var srcPlanes = [UnsafePointer<UInt8>?](repeating: nil, count: 4)
        var srcStrides = [Int32](repeating: 0, count: 4)
        for p in 0..<input.planeCount {
            srcPlanes[p] = UnsafePointer(input.baseAddress(ofPlane: p).assumingMemoryBound(to: UInt8.self))
            srcStrides[p] = Int32(input.bytesPerRow[p])
        }
        var dstPlanes = [UnsafeMutablePointer<UInt8>?](repeating: nil, count: 4)
        var dstStrides = [Int32](repeating: 0, count: 4)
        for p in 0..<output.planeCount {
            dstPlanes[p] = output.producerBaseAddress(ofPlane: p).assumingMemoryBound(to: UInt8.self)
            dstStrides[p] = Int32(output.bytesPerRow[p])
        }
        let rows = sws_scale(context, srcPlanes, srcStrides, 0, Int32(input.height), dstPlanes, dstStrides)
        try FFmpeg.check(rows, "sws_scale \(source.format)→\(destination.format)")
    }
}
