/// The two markers every simulated frame and tone carries — a public contract (see README):
/// tests, `capture inspect` and other programs decode them from recorded files.
///
/// - Frame-index stamp: the top band of every frame (height `max(8, height / 30)` rounded up to
///   even) is split into 32 equal cells across the full width; cell `k` spans
///   `k * width / 32 ..< (k + 1) * width / 32` and carries bit `31 − k` of the frame index as
///   luma 235 (1) or 16 (0), with neutral chroma.
/// - A/V sync marker: for every whole second `t ≥ 1` of presentation time, the first video frame
///   with PTS ≥ t shows a luma-235 square filling the bottom-right eighth (width/8 × height/8);
///   the audio, otherwise a continuous sine, switches to a 3 kHz tone for 50 ms starting exactly
///   at sample `t × rate`.
public struct FrameMarkerLayout: Sendable, Hashable {
    public let width: Int
    public let height: Int

    public static let bitCount = 32
    public static let lumaOne: UInt8 = 235
    public static let lumaZero: UInt8 = 16
    public static let neutralChroma: UInt8 = 128

    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// Height of the stamp band: `max(8, height / 30)`, rounded up to an even number of rows.
    public var stampBandHeight: Int {
        let h = max(8, height / 30)
        return h + (h & 1)
    }

    /// Columns of stamp cell `k` (0 is the leftmost, carrying bit 31).
    public func stampCellColumns(_ k: Int) -> Range<Int> {
        (k * width / Self.bitCount) ..< ((k + 1) * width / Self.bitCount)
    }

    /// The bottom-right eighth where the sync flash appears.
    public var syncMarkerColumns: Range<Int> { (width - width / 8) ..< width }
    public var syncMarkerRows: Range<Int> { (height - height / 8) ..< height }
}

/// The audio side of the sync marker and the default tone.
public struct SyncToneSpec: Sendable, Hashable {
    /// The continuous tone's frequency in Hz.
    public var toneFrequency: Double = 1000
    /// The tone's level in dBFS (peak of the sine relative to full scale).
    public var toneLevelDBFS: Double = -12
    /// The burst that marks each whole second.
    public var burstFrequency: Double = 3000
    /// Burst length in seconds.
    public var burstDuration: Double = 0.050

    public init() {}
}
