import CaptureKit
import CaptureKitTesting
import Foundation

/// Shared helpers for the end-to-end tests: temporary folders, running the real ffmpeg tools as
/// oracles, and recording from the simulator through the public API.
enum TestSupport {
    static func temporaryDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "capturekit-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    struct ToolResult {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs a command-line tool (found on PATH) and collects its output.
    static func run(_ tool: String, _ arguments: [String]) throws -> ToolResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        // Read both pipes before waiting so a chatty tool cannot block on a full pipe.
        let errData = Locked(Data())
        let errReaderDone = DispatchSemaphore(value: 0)
        let errReader = Thread {
            errData.withLock { $0 = err.fileHandleForReading.readDataToEndOfFile() }
            errReaderDone.signal()
        }
        errReader.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        errReaderDone.wait()  // the reader's end (the pipe closed with the process)
        return ToolResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                          stderr: errData.withLock { String(decoding: $0, as: UTF8.self) })
    }

    /// Runs a GStreamer tool with a time limit (coreutils `timeout`), once more if the limit is hit:
    /// a gst-launch-1.0 was once seen asleep for ever on a file it plays in 0.1 s when run again, on
    /// a machine loaded by parallel tests; a hang must be a retry and then a failure, never a stuck CI.
    static func runGStreamer(_ tool: String, _ arguments: [String], seconds: Int = 60) throws -> ToolResult {
        var result = try run("timeout", ["-k", "5", String(seconds), tool] + arguments)
        // 124: timed out; 137 or 9 (timeout re-raises the KILL it had to send, so the status can be
        // the bare signal number): killed after the grace period. Either way, one retry.
        if result.status == 124 || result.status == 137 || result.status == 9 {
            result = try run("timeout", ["-k", "5", String(seconds), tool] + arguments)
        }
        return result
    }

    /// ffprobe's view of a file's streams (with frames counted by decoding).
    static func probeStreams(_ path: String) throws -> [[String: Any]] {
        let result = try run("ffprobe", ["-v", "error", "-count_frames", "-show_streams", "-of", "json", path])
        guard result.status == 0,
              let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let streams = json["streams"] as? [[String: Any]] else {
            throw CaptureError.fileOperationFailed(path: path, reason: "ffprobe failed: \(result.stderr)")
        }
        return streams
    }

    /// Records from simulated devices in virtual time through the public API.
    static func record(camera: String? = "sim:back", microphone: String? = "sim:mic", seconds: Double,
                       size: Dimensions? = nil, fps: Int? = nil, seed: UInt64 = 0,
                       preset: VideoEncoderSettings.Preset = .ultrafast, to path: String) async throws -> RecordingSummary {
        let registry = CaptureKit.makeRegistry(seed: seed)
        let session = CaptureSession(pace: .virtual)
        // The device's own (or chosen) format, not the `high` preset's.
        try session.setSessionPreset(.inputPriority)
        if let camera {
            let device = try registry.device(uniqueID: camera)
            if size != nil || fps != nil {
                let format = try require(device.format(matching: size, frameRate: fps))
                try device.lockForConfiguration()
                try device.setActiveFormat(format)
                if let fps { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: Int32(fps))) }
                device.unlockForConfiguration()
            }
            try session.addInput(CaptureDeviceInput(device: device))
        }
        if let microphone {
            try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: microphone)))
        }
        let output = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = preset
        output.settings = settings
        output.maxRecordedDuration = MediaTime(seconds: seconds, preferredTimescale: 1_000_000)
        try session.addOutput(output)
        try session.startRunning()
        defer { session.stopRunning() }
        return try await output.record(to: path)
    }

    /// Records 640x480 sim:back + sim:mic in virtual time for 2 s of file: frames 0…29, a pause from
    /// frame 30 to 59 (a data output pauses the movie at frame 29 and resumes it at frame 59), then
    /// frames 60…89. In virtual time the pump waits for each callback, so each switch acts before the
    /// next frame is made.
    static func recordPausedSecond(to path: String) async throws -> RecordingSummary {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        movie.maxRecordedDuration = MediaTime(value: 2, timescale: 1)
        try session.addOutput(movie)
        final class Switcher: VideoDataOutputSampleBufferDelegate {
            let movie: MovieFileOutput
            init(_ movie: MovieFileOutput) { self.movie = movie }
            func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
                if sample.sequenceNumber == 29 { movie.pauseRecording() }
                if sample.sequenceNumber == 59 { movie.resumeRecording() }
            }
        }
        let data = VideoDataOutput()
        data.setSampleBufferDelegate(Switcher(movie), queue: DispatchQueue(label: "switch"))
        try session.addOutput(data)
        // Stepped: no frame flows until the recording has started, so it starts on frame 0 however
        // slowly this task is scheduled (polling with sleeps let a loaded machine record frames
        // 0…59 before the switcher was installed).
        try session.enableManualStepping()
        try session.startRunning()
        defer { session.stopRunning() }
        let recording = Task { try await movie.record(to: path) }
        try await eventually("the movie to start recording") { movie.isRecording }
        // 3 s of frames and one more: 2 s recorded, 1 s paused, then the limit ends the file.
        try session.advance(by: MediaTime(value: 91, timescale: 30))
        return try await recording.value
    }

    /// Decodes a file and runs the marker analysis over every frame and all audio (mono mix of channel 0).
    static func analyze(_ path: String) throws -> RecordingReport {
        var analyzer = RecordingAnalyzer()
        try MediaFileReader(path: path).decode(
            video: { frame in
                analyzer.addVideoFrame(LumaPlane(base: frame.luma, width: frame.width, height: frame.height,
                                                 bytesPerRow: frame.bytesPerRow[0]),
                                       presentationTime: frame.presentationTime)
            },
            audio: { samples, channels, rate, start in
                let mono = channels == 1 ? samples : stride(from: 0, to: samples.count, by: channels).map { samples[$0] }
                analyzer.addAudio(mono, startTime: start, sampleRate: rate)
            })
        return analyzer.report()
    }
}

/// A `swift-testing`-friendly #require for non-test contexts.
func require<T>(_ value: T?, _ message: String = "missing value") throws -> T {
    guard let value else { throw CaptureError.invalidState(message) }
    return value
}
