import CaptureKit
import Foundation
import Testing

@Suite struct RecordingPlotTests {
    /// Rows of column `x` inside `panel` whose pixel is `color` (exactly: PNG is lossless).
    static func rows(of color: (UInt8, UInt8, UInt8), column x: Int, in panel: RecordingPlot.Panel,
                     picture: PNGCodec.Picture) -> [Int] {
        (panel.top..<(panel.top + panel.height)).filter { y in
            guard let p = picture.rgb(x: x, y: y) else { return false }
            return p == color
        }
    }

    /// The value (ms) the marks drawn in column `x` stand for, read from the pixels: the middle of
    /// the run of marked rows, through the panel's axis.
    static func drawnValue(of color: (UInt8, UInt8, UInt8), column x: Int, in panel: RecordingPlot.Panel,
                           picture: PNGCodec.Picture) -> Double? {
        let hits = rows(of: color, column: x, in: panel, picture: picture)
        guard let first = hits.first, let last = hits.last else { return nil }
        return panel.value(row: (first + last) / 2)
    }

    @Test func theDrawnPointsSitWhereTheirValuesSay() throws {
        let markers = [SyncMarker(second: 1, videoTime: 1.040, audioTime: 1.0), SyncMarker(second: 2, videoTime: 2.0, audioTime: 2.010),
                       SyncMarker(second: 3, videoTime: 3.0, audioTime: nil)]
        let frames = (0..<120).map { Double($0) / 30 }.filter { $0 < 1.5 || $0 > 1.6 }  // frames 45…48 (1.5–1.6 s) missing
        let plot = RecordingPlot(syncMarkers: markers, frameTimes: frames)
        #expect(plot.offsets.points.map(\.value).map { ($0 * 10).rounded() / 10 } == [40, -10])
        #expect(plot.unpairedMarkers == 1)
        #expect(plot.intervals.points.count == frames.count - 1)
        let picture = try PNGCodec.decode(try plot.png())
        #expect(picture.width == plot.width && picture.height == plot.height)
        for point in plot.offsets.points {
            let read = try #require(Self.drawnValue(of: RecordingPlot.offsetColor, column: point.x, in: plot.offsets, picture: picture))
            #expect(abs(read - point.value) < 1.5, "drawn at \(read) ms, value \(point.value) ms")
        }
        // The gap shows as a spike of 5 frame intervals; elsewhere the trace sits at 33.3 ms.
        let spike = try #require(plot.intervals.points.max { $0.value < $1.value })
        #expect(abs(spike.value - 5000.0 / 30) < 0.5)
        let quiet = plot.intervals.x(time: 0.5)
        let steady = try #require(Self.drawnValue(of: RecordingPlot.intervalColor, column: quiet, in: plot.intervals, picture: picture))
        #expect(abs(steady - 1000.0 / 30) < 2, "trace at \(steady) ms")
    }

    @Test func inspectPlotShowsAnInjected40msAudioOffset() async throws {
        let path = try await InspectCommandTests.recording.path()
        let dir = (path as NSString).deletingLastPathComponent
        // The audio of the same recording, 40 ms later against its video (stream copy, no re-encoding).
        let shifted = dir + "/audio-late.mp4"
        let ffmpeg = try await offPool("ffmpeg", ["-v", "error", "-y", "-i", path, "-itsoffset", "0.040", "-i", path,
                                                  "-map", "0:v", "-map", "1:a", "-c", "copy", shifted])
        #expect(ffmpeg.status == 0, "\(ffmpeg.stderr)")

        var values: [String: [Double]] = [:]
        for (name, file) in [("original", path), ("shifted", shifted)] {
            let out = dir + "/plot-\(name).png"
            let result = try await offPool(CommandLineTests.binary, ["inspect", file, "--plot", out, "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            let report = try JSONDecoder().decode(InspectionReport.self, from: Data(result.stdout.utf8))
            let plot = try #require(report.plot)
            #expect(plot.path == out)
            #expect(plot.offsets.points.count == 3, "markers at 1, 2 and 3 s: \(plot.offsets.points)")
            #expect(plot.intervalCount == 95)
            // Read the picture back through libavcodec and find each marker's mark in its column.
            let picture = try PNGCodec.decode([UInt8](Data(contentsOf: URL(fileURLWithPath: out))))
            #expect(picture.width == plot.width && picture.height == plot.height)
            values[name] = try plot.offsets.points.map { point in
                try #require(Self.drawnValue(of: RecordingPlot.offsetColor, column: point.x, in: plot.offsets, picture: picture))
            }
            // Frame intervals: the trace sits at one frame (33.3 ms) in the middle of the recording.
            let middle = plot.intervals.x(time: 1.5)
            let interval = try #require(Self.drawnValue(of: RecordingPlot.intervalColor, column: middle, in: plot.intervals, picture: picture))
            #expect(abs(interval - 1000.0 / 30) < 2, "\(name): interval drawn at \(interval) ms")
            let text = try await offPool(CommandLineTests.binary, ["inspect", file, "--plot", out, "--overwrite"])
            #expect(text.stdout.contains("plot: \(out) (3 A/V offsets, 95 frame intervals)"), "\(text.stdout)")
        }
        let original = try #require(values["original"]), late = try #require(values["shifted"])
        print("plot offsets read from the PNGs (ms): original \(original), audio delayed 40 ms \(late)")
        for value in original { #expect(abs(value) < 5, "original drawn at \(value) ms") }
        // Audio 40 ms late: video − audio = −40 ms at every marker.
        for value in late { #expect(abs(value + 40) < 5, "shifted drawn at \(value) ms") }
    }
}
