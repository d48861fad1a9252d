import CaptureKit
import Foundation
import Testing
@testable import CaptureV4L2

/// The VM flake of `ComplianceTests.aRecordingFromTheDevicePlays` on vivid ("Application provided
/// invalid, non monotonically increasing dts to muxer in stream 0: 3 >= 3" from the ffmpeg that
/// decodes the recording): a real-time camera's stamps may come closer than a frame period (vivid's
/// kernel thread runs late under TCG and stamps bursts), and the movie keeps the camera's own
/// stamps. `ffmpeg -i file -f null -` re-times frames to ticks of the nominal rate for the null
/// muxer, so two close frames share a tick and it logs an error, though the file is sound. Pinned
/// with the fake camera: a recording with one frame 1.75 ms after the one before it.
@Suite struct JitteredStampsDecodeTests {
    static func ffmpeg(_ arguments: [String]) throws -> (status: Int32, errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["ffmpeg"] + arguments
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (process.terminationStatus, text)
    }

    @Test(.timeLimit(.minutes(2))) func aRecordingWithStampsCloserThanAFramePeriodDecodesInItsOwnTimeBase() async throws {
        let ms: Int64 = 1_000_000
        var frames = (0..<30).map { FakeCamera.Frame(sequence: UInt32($0), timestampNs: 1_000 * ms + Int64($0) * 40 * ms, fill: UInt8(16 + $0)) }
        frames[5].timestampNs = frames[4].timestampNs + 1_750_000   // a burst: 1.75 ms after frame 4
        // Scripted frames are dequeued as fast as the stream thread polls: hold its first poll until
        // the recording is armed, or they could all be gone before it (then no frame past 0.5 s
        // would ever end the recording).
        let fake = FakeCamera(frames: frames)
        let armed = DispatchSemaphore(value: 0)
        let released = Locked(false)
        fake.beforePoll.withLock {
            $0 = {
                guard !released.withLock({ $0 }) else { return }
                _ = armed.wait(timeout: .now() + 30)
                released.withLock { $0 = true }
            }
        }
        let registry = DeviceRegistry(drivers: [V4L2Driver(system: fake)])
        let camera = try registry.device(uniqueID: "/dev/video0")
        let vga = try #require(camera.format(matching: Dimensions(width: 640, height: 480), frameRate: 25, pixelFormat: .yuyv)
                               ?? camera.format(matching: Dimensions(width: 640, height: 480), frameRate: 30, pixelFormat: .yuyv))
        try camera.lockForConfiguration()
        try camera.setActiveFormat(vga)
        camera.unlockForConfiguration()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: camera))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        movie.maxRecordedDuration = MediaTime(value: 1, timescale: 2)   // ends at the frame past 0.5 s
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        let path = NSTemporaryDirectory() + "capturekit-jitter-\(UUID().uuidString).mp4"
        defer { try? FileManager.default.removeItem(atPath: path) }
        // A hang guard: a recording that never reaches its limit is stopped (and the checks below
        // fail) instead of keeping the test waiting for ever.
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            movie.stopRecording()
        }
        defer { watchdog.cancel() }
        armed.signal()
        let summary = try await movie.record(to: path)
        #expect(summary.fileIsUsable && summary.videoFrames >= 10)
        // The old check: ffmpeg re-times to the nominal rate and complains about the close pair.
        let retimed = try Self.ffmpeg(["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(retimed.errors.contains("non monotonically increasing dts"), "\(retimed.errors)")
        // The check ComplianceTests makes now: the file's own time base, frame for frame — clean.
        let own = try Self.ffmpeg(["-v", "error", "-i", path, "-fps_mode", "passthrough", "-enc_time_base", "-1", "-f", "null", "-"])
        #expect(own.status == 0 && own.errors.isEmpty, "\(own.errors)")
    }
}
