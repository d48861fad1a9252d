import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Virtual pace renders a camera's next frame on a second thread while the current one is
/// delivered and encoded. A frame rendered ahead is used only if nothing it was made from changed,
/// so a recording is the same, frame for frame, with it on or off, even when controls change
/// between frames (here between harness steps, where the frame after the step is already rendered).
@Suite struct RenderAheadTests {
    static func record(rendersAhead: Bool, changingControls: Bool, byDeliverer: Bool = false)
        async throws -> (frames: [String], used: Int, discarded: Int, byDeliverer: Int) {
        let movie = try HarnessTests.folder() + "/ahead.mp4"
        var c = CaptureHarness.Configuration()
        c.seed = 11
        c.cameraFormat = "640x480@30"
        c.moviePath = movie
        c.microphone = nil
        let harness = try CaptureHarness(c)
        harness.scenario.rendersAhead = rendersAhead
        harness.scenario.leavesRenderAheadToDeliverer = byDeliverer
        try await harness.start()
        try await harness.advance(toFrame: 8)
        if changingControls, let camera = harness.camera {
            try camera.lockForConfiguration()
            try camera.setExposureTargetBias(1.5)
            camera.unlockForConfiguration()
            try await harness.advance(toFrame: 15)
            try camera.lockForConfiguration()
            try camera.setWhiteBalanceModeLocked(gains: WhiteBalanceGains(red: 2.2, green: 1, blue: 1.3))
            camera.unlockForConfiguration()
            try await harness.advance(toFrame: 22)
            try camera.lockForConfiguration()
            try camera.ramp(toVideoZoomFactor: 2, withRate: 4)
            camera.unlockForConfiguration()
        }
        try await harness.advance(toFrame: 40)
        let recording = await harness.finish()
        #expect(recording.frameCount == 40)
        let md5 = try TestSupportTools.run("ffmpeg", ["-v", "error", "-i", movie, "-map", "0:v", "-f", "framemd5", "-"])
        let counts = harness.scenario.renderAheadCounts
        return (md5.split(separator: "\n").filter { !$0.hasPrefix("#") }.map(String.init), counts.used, counts.discarded,
                harness.scenario.renderAheadByDeliverer)
    }

    @Test func theSameFramesWithOrWithoutRenderingAheadWhileControlsChange() async throws {
        let ahead = try await Self.record(rendersAhead: true, changingControls: true)
        let inTurn = try await Self.record(rendersAhead: false, changingControls: true)
        let unchanged = try await Self.record(rendersAhead: true, changingControls: false)
        #expect(ahead.frames.count == 40 && inTurn.frames.count == 40)
        #expect(ahead.frames == inTurn.frames)
        // The changes show: the first 8 frames match the run without them, later ones do not.
        #expect(Array(ahead.frames.prefix(8)) == Array(unchanged.frames.prefix(8)))
        #expect(zip(ahead.frames, unchanged.frames).dropFirst(10).allSatisfy { $0 != $1 })
        // Rendering ahead did the work, and each change threw a frame away.
        #expect(ahead.used >= 30, "used \(ahead.used)")
        #expect(ahead.discarded >= 3, "discarded \(ahead.discarded)")
        #expect(inTurn.used == 0 && inTurn.discarded == 0)
    }

    /// When the render queue has not begun a frame by the time it is due (its worker waiting for a
    /// core x264's threads hold), the delivering thread renders it itself. Here every frame takes
    /// that path: the same frames again, and the counts say who rendered them.
    @Test func theDeliveringThreadRendersAFrameTheQueueHasNotBegun() async throws {
        let byDeliverer = try await Self.record(rendersAhead: true, changingControls: true, byDeliverer: true)
        let inTurn = try await Self.record(rendersAhead: false, changingControls: true)
        #expect(byDeliverer.frames.count == 40 && byDeliverer.frames == inTurn.frames)
        #expect(byDeliverer.used >= 30 && byDeliverer.discarded >= 3, "used \(byDeliverer.used), discarded \(byDeliverer.discarded)")
        // The frames thrown away were never rendered (nothing began them), the others all here.
        #expect(byDeliverer.byDeliverer == byDeliverer.used, "\(byDeliverer)")
    }
}

enum TestSupportTools {
    static func run(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
