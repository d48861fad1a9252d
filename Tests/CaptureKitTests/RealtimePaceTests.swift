import CaptureKit
import Foundation
import Testing

/// Real-time pace is a mode, not the default in tests: one short check that it paces like a
/// device and still produces a clean, marker-correct file.
@Suite struct RealtimePaceTests {
    @Test func realtimeRecordingIsPacedAndClean() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let output = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        output.settings = settings
        output.maxRecordedDuration = MediaTime(value: 3, timescale: 2)
        try session.addOutput(output)
        let path = try TestSupport.temporaryDirectory() + "/realtime.mp4"
        let started = ContinuousClock.now
        try session.startRunning()
        let summary = try await output.record(to: path)
        session.stopRunning()
        let elapsed = ContinuousClock.now - started
        // A lower bound only: pacing means 1.5 s of media cannot take less than about 1.5 s.
        #expect(elapsed >= .milliseconds(1400), "1.5 s recorded in \(elapsed)")
        #expect(summary.videoFrames == 45)
        let report = try TestSupport.analyze(path)
        #expect(report.isClean)
        #expect(report.syncMarkers.map(\.second) == [1])
        // Audio that arrived before the first frame is kept and cut at its PTS, so sync holds in real time too.
        for marker in report.syncMarkers {
            let offset = try #require(marker.offset)
            #expect(abs(offset) <= 1.0 / 30, "A/V offset \(offset) s")
        }
    }
}
