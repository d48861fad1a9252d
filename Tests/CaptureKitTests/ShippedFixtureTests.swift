import CaptureKit
import Foundation
import Testing

/// The fixture shipped in Fixtures/: recorded by `capture fixture record` from the simulated
/// webcam (MJPEG 1280x720 at 30 fps, frame 10 lost, timestamps jittered by up to ±400 µs).
/// Replayed through the public API it must give back exactly what the device delivered.
@Suite struct ShippedFixtureTests {
    static var path: String {
        // Tests/CaptureKitTests/ShippedFixtureTests.swift → repository root → Fixtures/.
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/sim-webcam-mjpeg-720p30.nut").path
    }

    @Test func replayDeliversTheRecordedBuffersTimesAndDrop() async throws {
        let contents = try FixtureReader.read(path: Self.path)
        let recorded = try #require(contents.samples.first)
        #expect(recorded.count == 30)
        #expect(recorded.map(\.sequenceNumber) == Array(0...9) + Array(11...30))
        let replay = try await FixtureTestSupport.replay(["fixture:" + Self.path])
        let frames = replay.items.withLock { $0 }.filter { $0.mediaType == .video }
        #expect(frames.count == 30)
        // Relative PTS equal the recorded ones exactly, jitter included; bytes untouched.
        let origin = try #require(recorded.first).presentationTime
        let replayOrigin = try #require(frames.first).presentationTime
        #expect(frames.map { $0.presentationTime - replayOrigin } == recorded.map { $0.presentationTime - origin })
        #expect(frames.map(\.bytes) == recorded.map(\.data))
        #expect(frames.compactMap(\.discontinuity) == [Discontinuity(count: 1, reason: .discontinuity)])
        // The jitter is real: not every step is exactly one frame.
        let steps = zip(recorded.dropFirst(), recorded).map { ($0.presentationTime - $1.presentationTime).seconds }
        #expect(steps.contains { abs($0 - 1.0 / 30) > 1e-5 })
    }

    @Test func replayIntoAMovieKeepsTheFrameIndicesAndTheGap() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "fixture:" + Self.path)))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        let path = try TestSupport.temporaryDirectory() + "/replayed.mp4"
        // The fixture ends, the session stops by itself, the file is finalized.
        let summary = try await movie.record(to: path)
        #expect(summary.videoFrames == 30)
        let report = try TestSupport.analyze(path)
        #expect(report.frameIndices.compactMap { $0 } == Array(0...9) + Array(11...30))
        #expect(report.droppedIndices == [10])
        let check = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(check.status == 0 && check.stderr.isEmpty)
        // Per-frame PTS in the file equal the recorded ones, jitter and gap included, to the
        // track's 1/90000 s tick (half a tick of rounding).
        let recorded = try #require(try FixtureReader.read(path: Self.path).samples.first)
        let origin = try #require(recorded.first).presentationTime
        let expected = recorded.map { ($0.presentationTime - origin).seconds }
        let decoded = try Self.decodedVideoPTS(path)
        #expect(decoded.count == expected.count)
        let start = try #require(decoded.first)
        let worst = zip(decoded, expected).map { abs(($0 - start) - $1) }.max() ?? .infinity
        #expect(worst <= 0.5 / 90_000 + 1e-9, "largest PTS difference \(worst * 1e6) µs; file \(decoded.map { $0 - start }), recorded \(expected)")
    }

    /// Presentation times of the decoded video frames, in display order (ffprobe).
    static func decodedVideoPTS(_ path: String) throws -> [Double] {
        let result = try TestSupport.run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time",
                                                     "-of", "csv=p=0", path])
        #expect(result.status == 0, "\(result.stderr)")
        // One line per frame; the first may carry extra side-data fields after a comma.
        return result.stdout.split(separator: "\n").compactMap { line in
            line.split(separator: ",", omittingEmptySubsequences: false).first.flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        }
    }

    @Test func infoDescribesTheFixture() throws {
        let result = try TestSupport.run(CommandLineTests.binary, ["fixture", "info", "--json", Self.path])
        #expect(result.status == 0, "\(result.stderr)")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(info["version"] as? Int == 1)
        let device = try #require((info["devices"] as? [[String: Any]])?.first)
        #expect(device["uniqueID"] as? String == "sim:webcam")
        #expect(device["buffers"] as? Int == 30 && device["drops"] as? Int == 1)
        let broken = try TestSupport.run(CommandLineTests.binary, ["fixture", "info", "/etc/hostname"])
        #expect(broken.status != 0)
    }
}
