import CaptureKit
import Foundation
import Testing

/// Run last and on its own (ci/test runs it in a second pass, `--filter UnplugTests`): unplugging
/// vivid removes its nodes until the module is reloaded.
@Suite(.serialized, .enabled(if: DeviceEnvironment.available, DeviceEnvironment.skipReason), .timeLimit(.minutes(2)))
struct UnplugTests {
    @Test func unplugMidRecordingReportsAnErrorAndLeavesAPlayableFile() async throws {
        let node = try DeviceEnvironment.requireVivid()
        let dir = try DeviceEnvironment.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let registry = CaptureKit.makeRegistry()
        let camera = try DeviceEnvironment.device(registry, node)
        let format = try #require(camera.format(matching: Dimensions(width: 640, height: 480), frameRate: 25, pixelFormat: .yuyv))
        try camera.lockForConfiguration()
        try camera.setActiveFormat(format)
        try camera.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 25))
        camera.unlockForConfiguration()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)  // keep the format the test chose
        try session.addInput(CaptureDeviceInput(device: camera))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        movie.maxRecordedDuration = MediaTime(value: 20, timescale: 1)
        try session.addOutput(movie)
        let errors = Locked<[CaptureError]>([])
        let events = session.eventStream()
        let watcher = Task {
            for await event in events { if case .runtimeError(let e) = event { errors.withLock { $0.append(e) } } }
        }
        try session.startRunning()
        let path = dir + "/unplugged.mp4"
        let recording = Task { try await movie.record(to: path) }
        // Unplug once a second of video is in the file. (An async wait: the VM has one core, so
        // blocking this task would starve the recording task on the cooperative pool.)
        let waitStart = ContinuousClock.now
        try await DeviceEnvironment.eventually("a second of video in the file", within: .seconds(30)) { movie.recordedDuration.seconds >= 1 }
        let ticks = ContinuousClock.now - waitStart
        // Unplug through a second client of the same node: vivid's "disconnect" button.
        try V4L2Driver().openDevice(uniqueID: node).setValue(.bool(true), for: .custom("disconnect"))
        try await DeviceEnvironment.eventually("the session's runtime error after the unplug", within: .seconds(10)) { !errors.withLock { $0.isEmpty } }
        session.stopRunning()
        let outcome = await recording.result
        print("unplug: recording ended with \(outcome); session errors \(errors.withLock { $0 }); waited \(ticks) for the first second")
        watcher.cancel()
        #expect(errors.withLock { $0 }.contains(.deviceDisconnected(node)))
        #expect(registry.driverEvents.hasDisconnected(deviceID: node))
        let streams = try DeviceEnvironment.probe(path)
        let frames = Int(streams.first { $0["codec_type"] as? String == "video" }?["nb_read_frames"] as? String ?? "") ?? 0
        print("unplugged after 1 s of recording: the file has \(frames) frames")
        #expect(frames >= 10)
    }
}
