import CaptureCore

/// Brings frames of any raw format and size to I420 at one output size with a scaling mode
/// (fit: letterbox, fill: centre crop, resize: stretch), through `PixelConverter`. Reuses its
/// converters and buffers while the source stays the same. Confined to one thread at a time.
final class FrameScaler {
    let output: Dimensions
    let mode: VideoScalingMode
    private var converter: PixelConverter?
    private var cropBuffer: PixelBuffer?
    private var scaledBuffer: PixelBuffer?
    private let pool: PixelBufferPool

    init(output: Dimensions, mode: VideoScalingMode) {
        self.output = output
        self.mode = mode
        pool = PixelBufferPool(format: .yuv420, width: output.width, height: output.height)
    }

    /// The frame as I420 at the output size (the input itself when it already is).
    func scale(_ input: PixelBuffer) throws(CaptureError) -> PixelBuffer {
        let source = Dimensions(width: input.width, height: input.height)
        if input.format == .yuv420 && source == output { return input }
        var crop = (x: 0, y: 0, size: source)
        var place = (x: 0, y: 0, size: output)
        let (sw, sh, ow, oh) = (source.width, source.height, output.width, output.height)
        switch mode {
        case .resize: break
        case .fill where sw * oh != sh * ow:
            // Keep the output's aspect ratio from the middle of the source.
            let size = sw * oh > sh * ow ? Dimensions(width: even(sh * ow / oh), height: sh)
                                         : Dimensions(width: sw, height: even(sw * oh / ow))
            crop = (even((sw - size.width) / 2), even((sh - size.height) / 2), size)
        case .fit where sw * oh != sh * ow:
            let size = sw * oh > sh * ow ? Dimensions(width: ow, height: max(2, even(ow * sh / sw)))
                                         : Dimensions(width: max(2, even(oh * sw / sh)), height: oh)
            place = (even((ow - size.width) / 2), even((oh - size.height) / 2), size)
        default: break
        }
        var current = input
        if crop.size != source {
            guard [PixelFormat.yuv420, .nv12].contains(input.format) else {
                throw .formatNotSupported("cropping takes I420 or NV12 frames, not \(input.format)")
            }
            if cropBuffer?.format != input.format || cropBuffer?.width != crop.size.width || cropBuffer?.height != crop.size.height {
                cropBuffer = PixelBuffer(format: input.format, width: crop.size.width, height: crop.size.height)
            }
            copy(input, from: (crop.x, crop.y), into: cropBuffer!, at: (0, 0), size: crop.size)
            current = cropBuffer!
        }
        let currentSize = Dimensions(width: current.width, height: current.height)
        if converter?.source.format != current.format || converter?.source.dimensions != currentSize
            || converter?.destination.dimensions != place.size {
            converter = try PixelConverter(from: current.format, currentSize, to: .yuv420, place.size)
            scaledBuffer = place.size == output ? nil : PixelBuffer(format: .yuv420, width: place.size.width, height: place.size.height)
        }
        guard let out = pool.makeBuffer() else { throw .invalidState("scaling pool exhausted") }
        if let scaledBuffer {
            try converter!.convert(current, into: scaledBuffer)
            fillBlack(out)
            copy(scaledBuffer, from: (0, 0), into: out, at: (place.x, place.y), size: place.size)
        } else {
            try converter!.convert(current, into: out)
        }
        return out
    }

    private func even(_ v: Int) -> Int { v & ~1 }

    private func fillBlack(_ buffer: PixelBuffer) {
        for plane in 0..<buffer.planeCount {
            buffer.withProducerPlane(plane) { _ = $0.initializeMemory(as: UInt8.self, repeating: plane == 0 ? 16 : 128) }
        }
    }

    /// Copies a rectangle (even origin and size) between two planar 4:2:0 buffers of one format.
    private func copy(_ src: PixelBuffer, from origin: (Int, Int), into dst: PixelBuffer, at target: (Int, Int), size: Dimensions) {
        for plane in 0..<src.planeCount {
            let chroma = plane > 0
            let bytesPerPixel = chroma && src.format == .nv12 ? 2 : 1
            let divisor = chroma ? 2 : 1
            let rowBytes = size.width / divisor * bytesPerPixel
            let s = src.baseAddress(ofPlane: plane), d = dst.producerBaseAddress(ofPlane: plane)
            for row in 0..<(size.height / divisor) {
                let from = s + (origin.1 / divisor + row) * src.bytesPerRow[plane] + origin.0 / divisor * bytesPerPixel
                let to = d + (target.1 / divisor + row) * dst.bytesPerRow[plane] + target.0 / divisor * bytesPerPixel
                to.copyMemory(from: from, byteCount: rowBytes)
            }
        }
    }
}
