/// A format asked for in text, as `capture --format` takes it: `WxH@FPS` or `WxH@FPS:FOURCC`
/// (`1280x720@60:420f`; pixel formats 420v, 420f, NV12, I420, YUYV, MJPG). Nil for anything else:
/// empty text, a missing part, a rate of 0 or above 1000 frames per second (none exists, and the
/// frame duration 1/FPS must fit a `MediaTime`), an unknown pixel format. Fuzzed (`ci/fuzz format`).
public struct FormatRequest: Sendable, Hashable {
    public var dimensions: Dimensions
    public var frameRate: Int
    public var fourcc: String?

    /// The highest rate a request may name.
    public static let maximumFrameRate = 1000

    public init?(_ text: String) {
        let main = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard let sizeAndRate = main.first, main.count <= 2 else { return nil }
        let sizeRate = sizeAndRate.split(separator: "@", omittingEmptySubsequences: false).map(String.init)
        guard sizeRate.count == 2, let d = Dimensions(parsing: sizeRate[0]), let fps = Int(sizeRate[1]),
              fps > 0, fps <= Self.maximumFrameRate else { return nil }
        dimensions = d
        frameRate = fps
        fourcc = main.count == 2 ? main[1] : nil
        if let fourcc, PixelFormat(name: fourcc) == nil { return nil }
    }

    /// The constant frame duration the request names (1/FPS).
    public var frameDuration: MediaTime { MediaTime(value: 1, timescale: Int32(frameRate)) }
}
