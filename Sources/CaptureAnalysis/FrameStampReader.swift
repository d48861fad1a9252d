import CaptureCore

/// Reads the per-frame markers of `FrameMarkerLayout` back out of decoded luma.
///
/// Only the inner part of each marker region is sampled: lossy coding blurs edges and rings
/// around them, while the centre of a flat block survives almost untouched.
public enum FrameStampReader {
    /// Luma halfway between the "0" and "1" levels; means above it read as 1 / lit.
    public static let threshold = (Double(FrameMarkerLayout.lumaZero) + Double(FrameMarkerLayout.lumaOne)) / 2

    /// How close (in luma) a cell mean may come to `threshold` before the band is rejected:
    /// a quarter of the 0–1 swing. A real stamp's cells sit near 16 or 235 even after coding,
    /// while ordinary picture content (grey, gradients, bars) lands in this no-man's land, so
    /// such frames read as "no stamp" instead of as a wrong index.
    public static let ambiguityMargin = (Double(FrameMarkerLayout.lumaOne) - Double(FrameMarkerLayout.lumaZero)) / 4

    /// Decodes the 32-bit frame-index stamp, or nil when the band does not look like a stamp:
    /// the frame is too small to carry one, or any cell mean lies within `ambiguityMargin` of
    /// `threshold`.
    ///
    /// Each cell is sampled over the central half of its columns and the central half of the
    /// band's rows.
    public static func frameIndex(in plane: LumaPlane) -> UInt32? {
        let layout = FrameMarkerLayout(width: plane.width, height: plane.height)
        let band = layout.stampBandHeight
        guard plane.width >= FrameMarkerLayout.bitCount, plane.height >= band else { return nil }
        let rows = centralHalf(0 ..< band)
        var value: UInt32 = 0
        for k in 0 ..< FrameMarkerLayout.bitCount {
            let columns = centralHalf(layout.stampCellColumns(k))
            guard let mean = plane.meanLuma(columns: columns, rows: rows) else { return nil }
            guard abs(mean - threshold) >= ambiguityMargin else { return nil }
            if mean > threshold {
                value |= 1 << UInt32(FrameMarkerLayout.bitCount - 1 - k)
            }
        }
        return value
    }

    /// True when the sync marker (the bottom-right eighth) is lit: the mean luma of its central
    /// half, in both directions, is above `threshold`. The surrounding background is dark
    /// (≈ 40), so no ambiguity band is needed here.
    public static func hasSyncFlash(in plane: LumaPlane) -> Bool {
        let layout = FrameMarkerLayout(width: plane.width, height: plane.height)
        let columns = centralHalf(layout.syncMarkerColumns)
        let rows = centralHalf(layout.syncMarkerRows)
        guard let mean = plane.meanLuma(columns: columns, rows: rows) else { return false }
        return mean > threshold
    }

    /// The middle half of a range (its outer quarters dropped), or the range itself when it is
    /// too short to trim.
    static func centralHalf(_ range: Range<Int>) -> Range<Int> {
        let trim = range.count / 4
        return (range.lowerBound + trim) ..< (range.upperBound - trim)
    }
}
