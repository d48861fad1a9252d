import CaptureCore

/// An 8-bit grey image the detectors read: a copy of (a region of) a frame's luma plane, rows
/// packed (stride = width). Copying lets the frame's buffer return to the device's pool at once,
/// so detection never holds capture buffers.
public struct LumaImage: Sendable {
    public let width: Int
    public let height: Int
    public var pixels: [UInt8]
    /// Where this image sits in the frame it was cut from (pixels), and that frame's size.
    public let origin: (x: Int, y: Int)
    public let frameSize: Dimensions

    public init(width: Int, height: Int, pixels: [UInt8], origin: (x: Int, y: Int) = (0, 0), frameSize: Dimensions? = nil) {
        precondition(pixels.count == width * height, "LumaImage: \(pixels.count) bytes for \(width)x\(height)")
        self.width = width
        self.height = height
        self.pixels = pixels
        self.origin = origin
        self.frameSize = frameSize ?? Dimensions(width: width, height: height)
    }

    /// Copies the luma of `region` (pixels, clamped to the frame) out of a planar (NV12, I420) or
    /// packed YUYV buffer; nil for other formats (convert first).
    public static func copy(from buffer: PixelBuffer, region: PixelRegion? = nil) -> LumaImage? {
        // Compressed (MJPEG) and RGB buffers have no luma plane: the caller converts them first.
        guard [PixelFormat.nv12, .yuv420, .yuyv].contains(buffer.format) else { return nil }
        let frame = Dimensions(width: buffer.width, height: buffer.height)
        let r = (region ?? PixelRegion(x: 0, y: 0, width: buffer.width, height: buffer.height)).clamped(to: frame)
        guard r.width > 0, r.height > 0 else { return nil }
        let stride = buffer.bytesPerRow[0]
        let base = buffer.baseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
        var pixels = [UInt8](repeating: 0, count: r.width * r.height)
        switch buffer.format {
        case .nv12, .yuv420:
            pixels.withUnsafeMutableBufferPointer { out in
                for row in 0..<r.height {
                    (out.baseAddress! + row * r.width).update(from: base + (r.y + row) * stride + r.x, count: r.width)
                }
            }
        case .yuyv:
            pixels.withUnsafeMutableBufferPointer { out in
                for row in 0..<r.height {
                    let src = base + (r.y + row) * stride + r.x * 2
                    let dst = out.baseAddress! + row * r.width
                    for x in 0..<r.width { dst[x] = src[x * 2] }
                }
            }
        default:
            return nil
        }
        return LumaImage(width: r.width, height: r.height, pixels: pixels, origin: (r.x, r.y), frameSize: frame)
    }
}

/// A rectangle in pixels.
public struct PixelRegion: Sendable, Hashable {
    public var x, y, width, height: Int
    public init(x: Int, y: Int, width: Int, height: Int) { self.x = x; self.y = y; self.width = width; self.height = height }

    public func clamped(to size: Dimensions) -> PixelRegion {
        let x0 = min(max(x, 0), size.width), y0 = min(max(y, 0), size.height)
        let x1 = min(max(x + width, x0), size.width), y1 = min(max(y + height, y0), size.height)
        return PixelRegion(x: x0, y: y0, width: x1 - x0, height: y1 - y0)
    }
}

/// One process-wide lock around every call into ZBar and OpenCV. Each detector instance is used by
/// one thread at a time already; this also keeps the libraries' own shared state (ZBar's lazily
/// initialised reference lock, OpenCV's cascade loading and thread pool) away from concurrent
/// first use by several outputs. Detection is one output's work, so the cost is nil in practice.
enum DetectorLibraries {
    static let lock = Locked(())
}
