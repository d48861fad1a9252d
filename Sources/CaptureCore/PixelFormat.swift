/// A pixel format named by its V4L2 fourcc, so simulator, V4L2 and file formats share one vocabulary.
public struct PixelFormat: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32

    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Builds the fourcc from four ASCII characters, as `v4l2_fourcc` does.
    public init(fourcc: String) {
        var bytes = Array(fourcc.utf8.prefix(4))
        while bytes.count < 4 { bytes.append(0x20) }
        rawValue = UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24
    }

    /// Packed 4:2:2, Y0 U Y1 V (`V4L2_PIX_FMT_YUYV`).
    public static let yuyv = PixelFormat(fourcc: "YUYV")
    /// 4:2:0, a Y plane then one interleaved UV plane (`V4L2_PIX_FMT_NV12`, Apple's 420v).
    public static let nv12 = PixelFormat(fourcc: "NV12")
    /// 4:2:0, Y, U and V planes (`V4L2_PIX_FMT_YUV420`, I420).
    public static let yuv420 = PixelFormat(fourcc: "YU12")
    /// Motion JPEG: each buffer is one compressed JPEG image (`V4L2_PIX_FMT_MJPEG`).
    public static let mjpeg = PixelFormat(fourcc: "MJPG")
    /// Packed 8-bit R, G, B (`V4L2_PIX_FMT_RGB24`).
    public static let rgb24 = PixelFormat(fourcc: "RGB3")

    public static let all: [PixelFormat] = [.yuyv, .nv12, .yuv420, .mjpeg, .rgb24]

    public var fourcc: String {
        let bytes = [rawValue & 0xff, rawValue >> 8 & 0xff, rawValue >> 16 & 0xff, rawValue >> 24 & 0xff]
        return String(decoding: bytes.map { UInt8($0) }, as: UTF8.self)
    }

    public var description: String { fourcc }

    /// Parses a fourcc or a common alias (`i420`, `420v`).
    public init?(name: String) {
        switch name.lowercased() {
        case "yuyv", "yuy2": self = .yuyv
        case "nv12", "420v", "420f": self = .nv12
        case "yu12", "i420", "yuv420p": self = .yuv420
        case "mjpg", "mjpeg": self = .mjpeg
        case "rgb3", "rgb24": self = .rgb24
        default: return nil
        }
    }

    public var isCompressed: Bool { self == .mjpeg }

    /// One plane's geometry for a frame: bytes per row (unpadded) and rows.
    public struct PlaneGeometry: Sendable, Hashable {
        public let bytesPerRow: Int
        public let rows: Int
    }

    /// The planes a raw frame of this format has; empty for compressed formats.
    public func planes(width: Int, height: Int) -> [PlaneGeometry] {
        let cw = (width + 1) / 2, ch = (height + 1) / 2
        switch self {
        case .yuyv: return [PlaneGeometry(bytesPerRow: cw * 4, rows: height)]
        case .nv12: return [PlaneGeometry(bytesPerRow: width, rows: height), PlaneGeometry(bytesPerRow: cw * 2, rows: ch)]
        case .yuv420:
            return [PlaneGeometry(bytesPerRow: width, rows: height),
                    PlaneGeometry(bytesPerRow: cw, rows: ch), PlaneGeometry(bytesPerRow: cw, rows: ch)]
        case .rgb24: return [PlaneGeometry(bytesPerRow: width * 3, rows: height)]
        default: return []
        }
    }
}

/// Width and height in pixels.
public struct Dimensions: Sendable, Hashable, CustomStringConvertible {
    public var width: Int
    public var height: Int
    public init(width: Int, height: Int) { self.width = width; self.height = height }

    /// Parses `WxH`, e.g. `1280x720`.
    public init?(parsing text: String) {
        let parts = text.lowercased().split(separator: "x")
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
        self.init(width: w, height: h)
    }

    public var description: String { "\(width)x\(height)" }
}
