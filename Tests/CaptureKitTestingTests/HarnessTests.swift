import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// The harness, tested with itself: step virtual time, push faults, read plain values.
@Suite struct HarnessTests {
    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "capturekit-harness-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func configuration(movie: String? = nil, faults: FaultTimeline = FaultTimeline()) -> CaptureHarness.Configuration {
        var c = CaptureHarness.Configuration()
        c.cameraFormat = "640x480@30"
        c.moviePath = movie
        c.faults = faults
        return c
    }

    @Test func aCleanRunDeliversEveryFrameOnTheGridInSync() async throws {
        let movie = try Self.folder() + "/clean.mp4"
        let harness = try CaptureHarness(Self.configuration(movie: movie))
        try await harness.start()
        try await harness.advance(by: 2.0)
        #expect(harness.delivered.frameCount == 60)
        let recording = await harness.finish()
        #expect(recording.frameCount == 60)
        #expect(recording.missingFrames == [])
        #expect(recording.delivered.frameSequence == Array(0..<60))
        #expect(recording.delivered.maximumJitterMicroseconds(frameDuration: 1.0 / 30) == 0)
        #expect(recording.errors.isEmpty, "\(recording.errors)")
        #expect(recording.stopReason == "requested")
        let offset = try #require(recording.maximumAVOffset)
        #expect(offset < 0.040, "A/V offset \(offset) s")
        let frequency = try #require(recording.dominantFrequency)
        #expect(abs(frequency - 1000) < 20, "tone at \(frequency) Hz")
        #expect(recording.file?.streams.count == 2)
    }

    @Test func stepsDeliverExactlyWhatTheyAllow() async throws {
        var c = Self.configuration()
        c.microphone = nil
        let harness = try CaptureHarness(c)
        try await harness.start()
        try await harness.advance(toFrame: 15)
        #expect(harness.delivered.frameSequence == Array(0..<15))
        try await harness.advance(by: 0.5)
        #expect(harness.delivered.frameCount == 15, "0.5 s from the start: frames 0…14, already delivered")
        try await harness.advance(by: 0.5)
        #expect(harness.delivered.frameSequence == Array(0..<30))
        let recording = await harness.finish()
        #expect(recording.summary == nil, "no movie output")
        #expect(recording.frameCount == 30)
    }

    @Test func droppedFramesAreExactlyThoseInjected() async throws {
        let movie = try Self.folder() + "/drops.mp4"
        var faults = FaultTimeline()
        faults.add(.dropFrames(count: 2), at: .frame(10), device: "sim:back")
        faults.add(.dropFrames(count: 1), at: .frame(40), device: "sim:back")
        let harness = try CaptureHarness(Self.configuration(movie: movie, faults: faults))
        try await harness.start()
        try await harness.advance(by: 2.0)
        let recording = await harness.finish()
        #expect(recording.delivered.missingFrames == [10, 11, 40])
        #expect(recording.missingFrames == [10, 11, 40])
        #expect(recording.frameCount == 57)
    }

    @Test func aPushedUnplugEndsTheStreamWithAnError() async throws {
        var c = Self.configuration()
        c.microphone = nil
        let harness = try CaptureHarness(c)
        try await harness.start()
        try await harness.advance(toFrame: 15)
        harness.push(.unplug, device: "sim:back", at: .time(MediaTime(value: 1, timescale: 1)))
        try? await harness.advance(by: 2.0)
        let recording = await harness.finish()
        #expect(recording.delivered.frameSequence == Array(0..<30), "nothing from 1 s on")
        #expect(recording.errors.map(\.type) == ["deviceDisconnected"])
        let error = try #require(recording.errors.first)
        #expect(abs(error.pts - 1.0) < 1e-6, "at \(error.pts) s: the end of the last frame")
    }

    /// A buffer the driver flags as failed (as vivid's "Inject V4L2_BUF_FLAG_ERROR" makes V4L2 do):
    /// the frame is lost, counted once as damaged on the registry's driver events, and no error.
    @Test func aBufferErrorLosesOneFrameCountedAsDamaged() async throws {
        let movie = try Self.folder() + "/damaged.mp4"
        var faults = FaultTimeline()
        faults.add(.bufferError, at: .frame(12), device: "sim:back")
        let harness = try CaptureHarness(Self.configuration(movie: movie, faults: faults))
        try await harness.start()
        try await harness.advance(by: 1.0)
        let recording = await harness.finish()
        #expect(recording.damagedFrames == 1)
        #expect(recording.delivered.missingFrames == [12])
        #expect(recording.missingFrames == [12], "the movie's own frame stamps")
        #expect(recording.errors.isEmpty, "\(recording.errors)")
        #expect(harness.registry.driverEvents.droppedCount(deviceID: "sim:back", reason: .corruptData) == 1)
    }

    /// `capture test --camera`: the scenario's faults follow the camera; a V4L2 one runs in real time.
    @Test func replacingTheCameraMovesItsFaultsAndPace() throws {
        let text = """
            {"version": 1, "duration": 2, "devices": {"camera": {"device": "sim:back", "format": "640x480@25"}},
             "faults": [{"at": 1, "kind": "bufferError", "device": "camera"}, {"at": 1.5, "kind": "diskFull", "bytes": 100000}],
             "expectations": {"damagedFrames": 1}}
            """
        var scenario = try Scenario.parse(Data(text.utf8), file: "p.json")
        scenario.replaceCamera(with: "/dev/video7")
        #expect(scenario.camera?.uniqueID == "/dev/video7")
        #expect(scenario.pace == .realtime)
        #expect(scenario.faults.events.map(\.device) == ["/dev/video7", nil])
        #expect(scenario.expectations.damagedFrames == Scenario.Range(min: 1, max: 1))
    }

    /// An interruption takes no virtual time and its scripted end resumes the session on another
    /// thread: the harness waits for that resume, so every run delivers the same frames (before the
    /// wait, runs delivered 30, 31 or 91 frames).
    @Test func anInterruptionResumesTheSameWayOnEveryRun() async throws {
        var sequences: [[Int64]] = []
        for _ in 0..<4 {
            var faults = FaultTimeline()
            faults.add(.interruptionBegan, at: .time(MediaTime(value: 1, timescale: 1)))
            faults.add(.interruptionEnded, at: .time(MediaTime(value: 2, timescale: 1)))
            var c = Self.configuration(faults: faults)
            c.microphone = nil
            let harness = try CaptureHarness(c)
            try await harness.start()
            for _ in 0..<30 { try await harness.advance(by: 0.1) }
            let recording = await harness.finish()
            #expect(recording.errors.map(\.type) == ["interrupted", "interruptionEnded"])
            sequences.append(recording.delivered.frameSequence)
        }
        print("interruption run: \(sequences[0].count) frames, from \(sequences[0].first ?? -1) to \(sequences[0].last ?? -1); around the interruption \(Array(sequences[0][28..<min(34, sequences[0].count)]))")
        #expect(Set(sequences).count == 1, "runs differ: \(sequences.map(\.count))")
        // Frames 0…29, then the resumed stream (a new stream: its sequence numbers start again at
        // 0, as V4L2's do after STREAMON) runs on to the end, without a gap.
        let resumed = Array(sequences[0].dropFirst(30))
        #expect(Array(sequences[0].prefix(30)) == Array(0..<30))
        #expect(resumed == Array(0..<Int64(resumed.count)) && resumed.count >= 60, "\(resumed)")
    }

    @Test func aDeniedStartIsAnErrorAtZero() async throws {
        var c = Self.configuration()
        c.authorization = .denied
        let harness = try CaptureHarness(c)
        await #expect(throws: CaptureError.self) { try await harness.start() }
        let recording = await harness.finish()
        #expect(recording.errors.map(\.type) == ["notAuthorized"])
        #expect(recording.errors.first?.pts == 0)
        #expect(recording.frameCount == 0)
    }
}

/// `ScenarioRunner` from Swift: a scenario document in, measured values and each expectation's
/// outcome out.
@Suite struct ScenarioRunnerTests {
    @Test func aScenarioRunsAndNamesEachFailedExpectationWithItsMeasuredValue() async throws {
        let text = """
            {"version": 1, "name": "burst", "duration": 2, "seed": 3,
             "devices": {"camera": {"device": "sim:back", "format": "640x480@30"}, "microphone": {"device": "sim:mic"}},
             "faults": [{"frame": 20, "kind": "dropFrames", "count": 3}, {"at": 1.2, "kind": "audioGap", "milliseconds": 60}],
             "expectations": {"frames": 57, "missingFrames": [20, 21, 22], "maxAVOffset": 0.04,
                              "audio": {"gapMilliseconds": {"min": 50, "max": 70}, "frequency": {"min": 980, "max": 1020}},
                              "errors": [], "stopReason": "requested"}}
            """
        let scenario = try Scenario.parse(Data(text.utf8), file: "burst.json")
        let result = await ScenarioRunner.run(scenario)
        #expect(result.passed, "\(result.failureMessages)")
        #expect(result.expectations.map(\.name) == ["frames", "missingFrames", "maxAVOffset", "stopReason", "errors", "audio.frequency",
                                                    "audio.gapMilliseconds"])
        #expect(result.measured?.missingFrames == [20, 21, 22])

        var wrong = scenario
        wrong.expectations.missingFrames = []
        wrong.expectations.frames = Scenario.Range(min: 60, max: 60)
        let failed = await ScenarioRunner.run(wrong)
        #expect(!failed.passed)
        #expect(failed.failureMessages == ["burst: frames: expected 60, measured 57", "burst: missingFrames: expected none, measured [20, 21, 22]"])
    }
}
