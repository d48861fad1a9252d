import CaptureAnalysis
import CaptureCore
import CaptureMedia
import Foundation

/// A two-panel picture of a recording's timing: the A/V offset at every paired sync marker (top)
/// and the interval between consecutive video frames (bottom), over one shared time axis, with
/// tick labels. Drawn into an RGB buffer here and encoded with libavcodec's PNG encoder
/// (`PNGCodec`), so plotting needs nothing beyond the libraries CaptureKit already links.
///
/// The plotted data stays readable: every panel carries its pixel rectangle, its axes and its
/// points with both their values and their pixel positions, so a test (or a `capture test`
/// artifact) can check what was drawn without reading pixels.
public struct RecordingPlot: Sendable {
    /// One drawn point: its time (s) and value (ms), and the pixel its mark is centred on.
    public struct Point: Sendable, Codable, Equatable {
        public var time: Double
        public var value: Double
        public var x: Int
        public var y: Int
    }

    /// An axis: its range and the values that get a tick, a grid line and a label.
    public struct Axis: Sendable, Codable, Equatable {
        public var minimum: Double
        public var maximum: Double
        public var ticks: [Double]
    }

    /// One panel: the plot area in pixels (`left`, `top`, `width`, `height`), its axes (time in s,
    /// value in ms) and its points.
    public struct Panel: Sendable, Codable, Equatable {
        public var title: String
        public var left: Int, top: Int, width: Int, height: Int
        public var time: Axis
        public var value: Axis
        public var points: [Point]

        /// The column `time` falls on.
        public func x(time t: Double) -> Int {
            left + Int(((t - time.minimum) / (time.maximum - time.minimum) * Double(width - 1)).rounded())
        }

        /// The row `value` falls on (larger values higher up), clamped to the panel.
        public func y(value v: Double) -> Int {
            let clamped = min(value.maximum, max(value.minimum, v))
            return top + Int(((value.maximum - clamped) / (value.maximum - value.minimum) * Double(height - 1)).rounded())
        }

        /// The value (ms) a row of the panel stands for: `y(value:)` inverted.
        public func value(row: Int) -> Double {
            value.maximum - Double(row - top) / Double(height - 1) * (value.maximum - value.minimum)
        }
    }

    public static let background: (UInt8, UInt8, UInt8) = (255, 255, 255)
    public static let plotArea: (UInt8, UInt8, UInt8) = (246, 246, 246)
    public static let grid: (UInt8, UInt8, UInt8) = (222, 222, 222)
    public static let ink: (UInt8, UInt8, UInt8) = (30, 30, 30)
    /// The colour of an A/V offset mark (a 9×9 square) and of the frame-interval trace.
    public static let offsetColor: (UInt8, UInt8, UInt8) = (214, 39, 40)
    public static let intervalColor: (UInt8, UInt8, UInt8) = (31, 119, 180)

    public let width: Int
    public let height: Int
    /// Top panel: `videoTime − audioTime` (ms) at each paired marker (at its audio burst's time),
    /// positive = video late.
    public let offsets: Panel
    /// Bottom panel: the gap (ms) between each frame and the one before it, at the later frame's time.
    public let intervals: Panel
    /// Markers with only a flash or only a burst (not plotted).
    public let unpairedMarkers: Int

    /// Lays out the plot of `syncMarkers` (e.g. `RecordingReport.syncMarkers`) and the frames'
    /// presentation times (seconds, any order).
    public init(syncMarkers: [SyncMarker], frameTimes: [Double], width: Int = 960, height: Int = 640) {
        self.width = max(320, width)
        self.height = max(240, height)
        let times = frameTimes.filter(\.isFinite).sorted()
        let paired = syncMarkers.compactMap { m -> (Double, Double)? in
            guard let o = m.offset, let v = m.videoTime, let a = m.audioTime else { return nil }
            _ = v
            return (a, o * 1000)
        }
        unpairedMarkers = syncMarkers.count - paired.count
        let gaps = zip(times.dropFirst(), times).map { ($0, ($0 - $1) * 1000) }

        // One time axis for both panels, so a marker sits above the frames around it.
        let lastTime = max(times.last ?? 0, paired.map(\.0).max() ?? 0, 1)
        let firstTime = min(0, times.first ?? 0)
        let timeAxis = Self.axis(from: firstTime, to: lastTime, targetTicks: 8)

        let worst = paired.map { abs($0.1) }.max() ?? 0
        let offsetAxis = Self.axis(from: -max(50, worst * 1.2), to: max(50, worst * 1.2), targetTicks: 6)
        let sortedGaps = gaps.map(\.1).sorted()
        let median = sortedGaps.isEmpty ? 33.3 : sortedGaps[sortedGaps.count / 2]
        let intervalAxis = Self.axis(from: 0, to: max(median * 2, (sortedGaps.last ?? 0) * 1.15, 1), targetTicks: 5)

        let left = 84, right = 40
        let plotWidth = self.width - left - right
        let panelHeight = (self.height - 3 * 44 - 20) / 2
        var top = Panel(title: "A/V OFFSET AT SYNC MARKERS (MS, + = VIDEO LATE)", left: left, top: 40, width: plotWidth,
                        height: panelHeight, time: timeAxis, value: offsetAxis, points: [])
        top.points = paired.map { t, v in Point(time: t, value: v, x: top.x(time: t), y: top.y(value: v)) }
        var bottom = Panel(title: "FRAME INTERVAL (MS)", left: left, top: 40 + panelHeight + 64, width: plotWidth,
                           height: panelHeight, time: timeAxis, value: intervalAxis, points: [])
        bottom.points = gaps.map { t, v in Point(time: t, value: v, x: bottom.x(time: t), y: bottom.y(value: v)) }
        offsets = top
        intervals = bottom
    }

    /// The plot as an RGB24 picture.
    public func render() -> PNGCodec.Picture {
        var canvas = Canvas(width: width, height: height)
        canvas.fill(0, 0, width, height, Self.background)
        for panel in [offsets, intervals] { drawFrame(panel, on: &canvas) }
        // The interval trace: consecutive points joined, so a stall or a burst shows as a spike.
        for (a, b) in zip(intervals.points, intervals.points.dropFirst()) {
            canvas.line(a.x, a.y, b.x, b.y, Self.intervalColor)
        }
        if intervals.points.count == 1, let p = intervals.points.first { canvas.fill(p.x - 1, p.y - 1, 3, 3, Self.intervalColor) }
        for p in offsets.points { canvas.fill(p.x - 4, p.y - 4, 9, 9, Self.offsetColor) }
        canvas.text("TIME (S)", x: intervals.left + intervals.width / 2 - 48, y: height - 18, scale: 2, Self.ink)
        return canvas.picture
    }

    /// The plot as PNG bytes.
    public func png() throws(CaptureError) -> [UInt8] { try PNGCodec.encode(render()) }

    /// Writes the PNG to `path`: a new file, or with `.replaceRegularFile` a regular file there
    /// replaced atomically (`OutputPath`).
    public func write(to path: String, existing: OutputPath.Existing = .refuse) throws(CaptureError) {
        let bytes = try png()
        try OutputPath.write(bytes, to: path, existing: existing)
    }

    private func drawFrame(_ panel: Panel, on canvas: inout Canvas) {
        canvas.text(panel.title, x: panel.left, y: panel.top - 24, scale: 2, Self.ink)
        canvas.fill(panel.left, panel.top, panel.width, panel.height, Self.plotArea)
        for t in panel.time.ticks {
            let x = panel.x(time: t)
            canvas.fill(x, panel.top, 1, panel.height, Self.grid)
            canvas.fill(x, panel.top + panel.height, 1, 6, Self.ink)
            let label = Self.label(t, step: Self.step(of: panel.time))
            canvas.text(label, x: x - label.count * 6 + 1, y: panel.top + panel.height + 9, scale: 2, Self.ink)
        }
        for v in panel.value.ticks {
            let y = panel.y(value: v)
            canvas.fill(panel.left, y, panel.width, 1, v == 0 ? (150, 150, 150) : Self.grid)
            canvas.fill(panel.left - 6, y, 6, 1, Self.ink)
            let label = Self.label(v, step: Self.step(of: panel.value))
            canvas.text(label, x: panel.left - 10 - label.count * 12, y: y - 7, scale: 2, Self.ink)
        }
        // Axis lines: left and bottom.
        canvas.fill(panel.left - 1, panel.top, 1, panel.height + 1, Self.ink)
        canvas.fill(panel.left - 1, panel.top + panel.height, panel.width + 1, 1, Self.ink)
    }

    // MARK: Axes

    /// A range from `low` to `high` widened to whole steps of 1, 2 or 5 × 10ⁿ, about `targetTicks` of them.
    static func axis(from low: Double, to high: Double, targetTicks: Int) -> Axis {
        let span = max(high - low, 1e-9)
        let step = niceStep(span / Double(targetTicks))
        let minimum = (low / step).rounded(.down) * step
        let maximum = (high / step).rounded(.up) * step
        let count = Int(((maximum - minimum) / step).rounded())
        let ticks = (0...count).map { (minimum + Double($0) * step) }.map { abs($0) < step * 1e-9 ? 0 : $0 }
        return Axis(minimum: minimum, maximum: maximum, ticks: ticks)
    }

    static func niceStep(_ raw: Double) -> Double {
        let power = pow(10, (log10(raw)).rounded(.down))
        let fraction = raw / power
        return (fraction <= 1 ? 1 : fraction <= 2 ? 2 : fraction <= 5 ? 5 : 10) * power
    }

    static func step(of axis: Axis) -> Double {
        axis.ticks.count > 1 ? axis.ticks[1] - axis.ticks[0] : 1
    }

    static func label(_ value: Double, step: Double) -> String {
        let decimals = step >= 1 ? 0 : step >= 0.1 ? 1 : 2
        return String(format: "%.\(decimals)f", value)
    }

    // MARK: Drawing

    /// An RGB24 canvas with rectangles, lines and a 5×7 bitmap font.
    struct Canvas {
        let width: Int, height: Int
        var pixels: [UInt8]

        init(width: Int, height: Int) {
            self.width = width
            self.height = height
            pixels = [UInt8](repeating: 0, count: width * height * 3)
        }

        var picture: PNGCodec.Picture { PNGCodec.Picture(width: width, height: height, pixels: pixels) }

        mutating func fill(_ x: Int, _ y: Int, _ w: Int, _ h: Int, _ c: (UInt8, UInt8, UInt8)) {
            let x0 = max(0, x), x1 = min(width, x + w), y0 = max(0, y), y1 = min(height, y + h)
            guard x1 > x0, y1 > y0 else { return }
            for row in y0..<y1 {
                var i = (row * width + x0) * 3
                for _ in x0..<x1 {
                    pixels[i] = c.0; pixels[i + 1] = c.1; pixels[i + 2] = c.2
                    i += 3
                }
            }
        }

        /// A two-pixel-wide line (Bresenham).
        mutating func line(_ xa: Int, _ ya: Int, _ xb: Int, _ yb: Int, _ c: (UInt8, UInt8, UInt8)) {
            var x = xa, y = ya
            let dx = abs(xb - xa), dy = -abs(yb - ya)
            let sx = xa < xb ? 1 : -1, sy = ya < yb ? 1 : -1
            var error = dx + dy
            while true {
                fill(x, y, 2, 2, c)
                if x == xb && y == yb { break }
                let e2 = 2 * error
                if e2 >= dy { error += dy; x += sx }
                if e2 <= dx { error += dx; y += sy }
            }
        }

        mutating func text(_ string: String, x: Int, y: Int, scale: Int, _ c: (UInt8, UInt8, UInt8)) {
            var cursor = x
            for character in string.uppercased() {
                let rows = RecordingPlot.glyphs[character] ?? Painter.glyphs[character] ?? Painter.glyphs["?"]!
                for (r, bits) in rows.enumerated() {
                    for column in 0..<5 where bits & (1 << (4 - column)) != 0 {
                        fill(cursor + column * scale, y + r * scale, scale, scale, c)
                    }
                }
                cursor += 6 * scale
            }
        }
    }

    /// Glyphs the contact sheet's font lacks (5×7, bit 4 = leftmost column).
    static let glyphs: [Character: [UInt8]] = [
        "C": [0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E], "E": [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F],
        "F": [0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10], "G": [0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F],
        "H": [0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11], "K": [0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11],
        "L": [0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F], "M": [0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11],
        "N": [0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11], "P": [0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10],
        "R": [0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11], "T": [0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04],
        "V": [0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04], "W": [0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A],
        "Y": [0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04], "Z": [0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F],
        "/": [0x01, 0x01, 0x02, 0x04, 0x08, 0x10, 0x10], "(": [0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02],
        ")": [0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08], "+": [0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0],
        "=": [0, 0, 0x1F, 0, 0x1F, 0, 0], ",": [0, 0, 0, 0, 0x0C, 0x04, 0x08],
        ":": [0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0],
    ]
}
