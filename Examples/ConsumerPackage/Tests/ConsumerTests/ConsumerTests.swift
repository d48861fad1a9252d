import CaptureKit
import CaptureKitTesting
import Consumer
import Foundation
import Testing

@Suite struct ConsumerTests {
    static func temporaryPath(_ name: String) throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("capturekit-consumer-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.appendingPathComponent(name).path
    }

    @Test func recordsOneSecondFromTheSimulatedCameraAndInspectsIt() async throws {
        let path = try Self.temporaryPath("take.mp4")
        let summary = try await recordTake(to: path, seconds: 1)
        #expect(summary.videoFrames == 30)

        // Read back by the library's inspection: what a decoder gets from the file.
        let report = try RecordingInspector.inspect(path: path, options: .init(expectFrames: 30))
        #expect(report.decodedVideoFrames == 30)
        #expect(report.streams.map(\.info.codec) == ["h264"])
        #expect(abs((report.duration ?? 0) - 1.0) < 0.05)
        let failed = report.checks.filter { !$0.passed }.map(\.name)
        #expect(failed.isEmpty, "failed checks: \(failed)")
    }

    @Test func runsAScenarioThroughCaptureKitTesting() async throws {
        let file = try Self.temporaryPath("drop.json")
        try Data("""
            {"version": 1, "name": "consumer-drop", "duration": 1, "seed": 7,
             "devices": {"camera": {"device": "sim:back", "format": "640x480@30"}},
             "faults": [{"frame": 10, "kind": "dropFrames", "count": 2}],
             "expectations": {"frames": 28, "missingFrames": [10, 11], "playable": true}}
            """.utf8).write(to: URL(fileURLWithPath: file))
        let result = await ScenarioRunner.run(file: file)
        #expect(result.passed, "\(result.failureMessages)")
        #expect(result.measured?.missingFrames == [10, 11])
        #expect(result.measured?.frames == 28)
    }
}
