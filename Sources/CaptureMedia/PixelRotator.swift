import CaptureCore

/// Rotates (clockwise, right angles) and mirrors planar YUV frames — what data outputs deliver
/// when their connection is rotated. Pure Swift over raw rows; no resampling, no loss.
public enum PixelRotator {
    /// The frame size after rotating by `angle`.
    public static func rotatedDimensions(_ d: Dimensions, angle: Int) -> Dimensions {
        angle == 90 || angle == 270 ? Dimensions(width: d.height, height: d.width) : d
    }

    /// Writes `input` rotated by `angle` (0/90/180/270, clockwise) and, if `mirrored`, flipped
    /// left-right after rotation, into `output` (same format, rotated size).
    public static func rotate(_ input: PixelBuffer, angle: Int, mirrored: Bool, into output: PixelBuffer) throws(CaptureError) {
        guard [PixelFormat.nv12, .yuv420].contains(input.format), output.format == input.format else {
            throw .formatNotSupported("rotation handles NV12 and I420 frames, not \(input.format)")
        }
        let size = rotatedDimensions(Dimensions(width: input.width, height: input.height), angle: angle)
        guard output.width == size.width, output.height == size.height else {
            throw .invalidArgument("rotated output must be \(size), not \(output.width)x\(output.height)")
        }
        let chromaBytes = input.format == .nv12 ? 2 : 1
        for plane in 0..<input.planeCount {
            let isChroma = plane > 0
            let w = isChroma ? (input.width + 1) / 2 : input.width
            let h = isChroma ? (input.height + 1) / 2 : input.height
            rotatePlane(src: input.baseAddress(ofPlane: plane).assumingMemoryBound(to: UInt8.self),
                        srcStride: input.bytesPerRow[plane], width: w, height: h,
                        bytesPerPixel: isChroma ? chromaBytes : 1,
                        dst: output.producerBaseAddress(ofPlane: plane).assumingMemoryBound(to: UInt8.self),
                        dstStride: output.bytesPerRow[plane], angle: angle, mirrored: mirrored)
        }
    }

    private static func rotatePlane(src: UnsafePointer<UInt8>, srcStride: Int, width w: Int, height h: Int, bytesPerPixel bpp: Int,
                                    dst: UnsafeMutablePointer<UInt8>, dstStride: Int, angle: Int, mirrored: Bool) {
        let outW = (angle == 90 || angle == 270) ? h : w
        for y in 0..<h {
            let row = src + y * srcStride
            for x in 0..<w {
                // Destination of source pixel (x, y) under a clockwise rotation.
                var (dx, dy): (Int, Int)
                switch angle {
                case 90: (dx, dy) = (h - 1 - y, x)
                case 180: (dx, dy) = (w - 1 - x, h - 1 - y)
                case 270: (dx, dy) = (y, w - 1 - x)
                default: (dx, dy) = (x, y)
                }
                if mirrored { dx = outW - 1 - dx }
                let out = dst + dy * dstStride + dx * bpp
                for b in 0..<bpp { out[b] = row[x * bpp + b] }
            }
        }
    }
}
