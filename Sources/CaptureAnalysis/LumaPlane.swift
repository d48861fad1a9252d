/// A read-only view of an 8-bit luma plane (the Y plane of a decoded frame).
///
/// It borrows the caller's memory and is only valid while that memory is, which is why it is
/// not `Sendable`: analyzers read what they need from it at once and never keep it.
public struct LumaPlane {
    public let base: UnsafeRawBufferPointer
    public let width: Int
    public let height: Int
    public let bytesPerRow: Int

    /// `base` must hold at least `(height − 1) × bytesPerRow + width` bytes; rows may be padded.
    public init(base: UnsafeRawBufferPointer, width: Int, height: Int, bytesPerRow: Int) {
        precondition(width >= 0 && height >= 0, "LumaPlane dimensions must not be negative")
        precondition(bytesPerRow >= width, "LumaPlane bytesPerRow must cover the width")
        precondition(height == 0 || base.count >= (height - 1) * bytesPerRow + width,
                     "LumaPlane buffer is smaller than its geometry")
        self.base = base
        self.width = width
        self.height = height
        self.bytesPerRow = bytesPerRow
    }

    /// The luma value at column `x`, row `y`.
    public subscript(x x: Int, y y: Int) -> UInt8 {
        precondition(x >= 0 && x < width && y >= 0 && y < height, "LumaPlane pixel out of bounds")
        return base[y * bytesPerRow + x]
    }

    /// Mean luma of a rectangle, sampled on a grid of at most `maxSamplesPerAxis` points per axis
    /// so the cost stays small however large the frame is; nil when the rectangle is empty or
    /// falls outside the plane.
    public func meanLuma(columns: Range<Int>, rows: Range<Int>, maxSamplesPerAxis: Int = 16) -> Double? {
        guard !columns.isEmpty, !rows.isEmpty,
              columns.lowerBound >= 0, columns.upperBound <= width,
              rows.lowerBound >= 0, rows.upperBound <= height else { return nil }
        let limit = max(1, maxSamplesPerAxis)
        let xStep = max(1, (columns.count + limit - 1) / limit)
        let yStep = max(1, (rows.count + limit - 1) / limit)
        var sum = 0
        var count = 0
        for y in stride(from: rows.lowerBound, to: rows.upperBound, by: yStep) {
            let rowStart = y * bytesPerRow
            for x in stride(from: columns.lowerBound, to: columns.upperBound, by: xStep) {
                sum += Int(base[rowStart + x])
                count += 1
            }
        }
        return Double(sum) / Double(count)
    }
}
