import CaptureKit
import Foundation
import Testing

/// What independent clients read from CaptureKit's files: AAC priming hidden (every stream starts at
/// 0), the ffmpeg CLI's re-encode keeping every frame once and A/V in sync, and fragments on the
/// requested cadence.
@Suite struct ClientInteropTests {
    /// ffprobe's `start_time` of each stream, in stream order.
    static func startTimes(_ path: String) throws -> [Double] {
        let result = try TestSupport.run("ffprobe", ["-v", "error", "-show_entries", "stream=start_time", "-of", "csv=p=0", path])
        return result.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    }

    /// Issue 19's case: `ffmpeg -i a.mp4 -c:v libx264 -c:a aac re.mp4` used to duplicate frame 0 and
    /// shift audio by 12 ms, because the fragmented file exposed the AAC priming as a −21.3 ms start.
    @Test(arguments: ["mp4", "mov"])
    func ffmpegReencodeKeepsEveryFrameOnceAndSync(container: String) async throws {
        let dir = try TestSupport.temporaryDirectory()
        let original = "\(dir)/a.\(container)", reencoded = "\(dir)/re.\(container)"
        let summary = try await TestSupport.record(seconds: 3, size: Dimensions(width: 640, height: 480), fps: 30, to: original)
        #expect(summary.fragmentsWritten > 0, "the default 10 s interval writes fragments while recording")
        #expect(try Self.startTimes(original) == [0, 0], "AAC priming must be hidden: every stream starts at 0")

        let encode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", original, "-c:v", "libx264", "-c:a", "aac", reencoded])
        #expect(encode.status == 0, "\(encode.stderr)")
        #expect(try Self.startTimes(reencoded) == [0, 0])
        let report = try TestSupport.analyze(reencoded)
        #expect(report.videoFrameCount == 90)
        #expect(report.frameIndices.compactMap { $0 } == Array(0..<90), "every frame once, in order")
        #expect(report.duplicatedIndices.isEmpty)
        let offsets = report.syncMarkers.compactMap(\.offset)
        #expect(offsets.count == 2, "markers at 1 s and 2 s: \(report.syncMarkers)")
        for offset in offsets { #expect(abs(offset) <= 0.001, "A/V offset \(offset * 1000) ms after re-encoding") }
    }

    /// Fragments come every interval: a keyframe is forced at each point of the fragment grid
    /// (whatever the GOP), so a 1 s interval gives keyframes at 0, 1, 2, 3 s and a fragment each.
    @Test func fragmentIntervalForcesKeyframesOnItsGrid() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = "\(dir)/grid.mp4"
        let registry = CaptureKit.makeRegistry(seed: 0)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let output = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .veryfast
        output.settings = settings
        output.movieFragmentInterval = MediaTime(value: 1, timescale: 1)
        output.maxRecordedDuration = MediaTime(value: 4, timescale: 1)
        try session.addOutput(output)
        try session.startRunning()
        let summary = try await output.record(to: path)
        session.stopRunning()

        let packets = try TestSupport.run("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries",
                                                     "packet=pts_time,flags", "-of", "csv=p=0", path])
        let keyframes = packets.stdout.split(separator: "\n").filter { $0.contains("K") }
            .compactMap { Double($0.split(separator: ",")[0]) }.sorted()
        #expect(keyframes == [0, 1, 2, 3], "keyframes at \(keyframes)")
        #expect(summary.fragmentsWritten == 4, "a first fragment at 0, then one at 1, 2 and 3 s")
        #expect(summary.videoEncoderLatencyFrames > 0 && summary.videoEncoderLatencyFrames <= 20,
                "veryfast holds \(summary.videoEncoderLatencyFrames) frames (look-ahead, B-frames, threads)")
    }

    /// A finished movie is defragmented with its index first (faststart), so a copy cut short — a
    /// partial download, `head -c` — still has its index: `capture inspect` reports the intact part
    /// and ffmpeg decodes up to the cut.
    @Test func aTruncatedCopyOfAFinishedMovieStillHasItsIndex() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = "\(dir)/whole.mp4", cut = "\(dir)/cut.mp4"
        _ = try await TestSupport.record(seconds: 4, size: Dimensions(width: 1280, height: 720), fps: 30, to: path)
        let data = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(data.range(of: Data("moov".utf8))!.lowerBound < data.range(of: Data("mdat".utf8))!.lowerBound, "the index comes first")
        try data.prefix(data.count * 6 / 10).write(to: URL(fileURLWithPath: cut))
        let report = try TestSupport.run(CommandLineTests.binary, ["inspect", "--json", cut])
        #expect(report.status == 3, "damaged but partly intact: \(report.stdout) \(report.stderr)")
        let json = try JSONSerialization.jsonObject(with: Data(report.stdout.utf8)) as? [String: Any]
        let damage = json?["damage"] as? [String: Any]
        let frames = damage?["intactVideoFrames"] as? Int ?? 0
        #expect(frames > 30 && frames < 120, "intact frames \(frames): \(report.stdout)")
    }
}
