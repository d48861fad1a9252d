import ArgumentParser
import CaptureKit
import Foundation

struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record video and/or audio to an MP4 or MOV file.",
        discussion: """
            Encodes H.264 (libx264, yuv420p) and AAC. With --pace virtual the simulator runs as fast as \
            the encoder allows and the file is identical on every run for the same --seed.
            """)

    @Option(help: "Camera unique ID (e.g. sim:back). Omit for audio only.")
    var camera: String?

    @Option(help: "Microphone unique ID (e.g. sim:mic). Omit for video only.")
    var microphone: String?

    @Option(help: "Seconds of media to record.")
    var duration: Double

    @Option(help: "Frame size WxH; picks the camera format of that size.")
    var size: String?

    @Option(help: "Frames per second; must lie in the format's frame-rate ranges.")
    var fps: Int?

    @Option(help: "virtual (as fast as possible, deterministic) or realtime (paced like a device).")
    var pace: CapturePace = .realtime

    @Option(help: "Seed for the simulator's content.")
    var seed: UInt64 = 0

    @Option(help: "x264 preset: ultrafast, superfast, veryfast, faster, fast, medium.")
    var preset: VideoEncoderSettings.Preset = .veryfast

    @Option(help: "Average video bitrate in bits/s (default: constant quality, CRF 23).")
    var bitrate: Int?

    @Option(name: .customLong("control"), help: "KEY=VALUE, repeatable: a camera control applied under the configuration lock before capture (see `capture controls DEVICE`).")
    var controls: [String] = []

    @Option(help: "WxH@FPS[:FOURCC]: the camera format and a constant frame rate, e.g. 1280x720@60:420f.")
    var format: String?

    @Flag(help: "Print the summary as JSON.")
    var json = false

    @Argument(help: "Output file (.mp4 or .mov).")
    var output: String

    struct Summary: Codable {
        var output: String
        var camera: String?
        var cameraFormat: String?
        var microphone: String?
        var microphoneFormat: String?
        var pace: String
        var seed: UInt64
        var preset: String
        var recording: RecordingSummary
        var wallSeconds: Double
        var speed: Double
        var file: MediaFileInfo
    }

    func validate() throws {
        guard camera != nil || microphone != nil else { throw ValidationError("give --camera, --microphone or both") }
        guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be a positive number of seconds") }
        if let size, Dimensions(parsing: size) == nil { throw ValidationError("--size must look like 1280x720, not '\(size)'") }
        if let fps, fps <= 0 { throw ValidationError("--fps must be positive") }
        if let bitrate, bitrate <= 0 { throw ValidationError("--bitrate must be positive") }
    }

    func run() async throws {
        let registry = CaptureKit.makeRegistry(seed: seed)
        let session = CaptureSession(pace: pace)
        var cameraDevice: CaptureDevice?
        var micDevice: CaptureDevice?
        do {
            if let camera {
                let device = try registry.device(uniqueID: camera)
                try configure(device)
                try ControlOptions.configure(device, format: format, controls: controls)
                try session.addInput(CaptureDeviceInput(device: device))
                cameraDevice = device
            }
            if let microphone {
                let device = try registry.device(uniqueID: microphone)
                try session.addInput(CaptureDeviceInput(device: device))
                micDevice = device
            }
        } catch {
            throw CommandFailure(error)
        }
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = preset
        settings.videoBitrate = bitrate
        movie.settings = settings
        movie.maxRecordedDuration = MediaTime(seconds: duration, preferredTimescale: 1_000_000)
        let started = Date()
        let summary: RecordingSummary
        do {
            try session.addOutput(movie)
            try session.startRunning()
            defer { session.stopRunning() }
            summary = try await movie.record(to: output)
        } catch {
            throw CommandFailure(error)
        }
        let wall = Date().timeIntervalSince(started)
        let info: MediaFileInfo
        do {
            info = try MediaFileReader(path: output).info
        } catch {
            throw CommandFailure(error)
        }
        let result = Summary(
            output: output, camera: cameraDevice?.uniqueID,
            cameraFormat: cameraDevice.map { "\($0.activeFormat.formatDescription) @ \(fpsText($0.activeVideoMinFrameDuration)) fps" },
            microphone: micDevice?.uniqueID, microphoneFormat: micDevice.map { "\($0.activeFormat.formatDescription)" },
            pace: pace.rawValue, seed: seed, preset: preset.rawValue, recording: summary, wallSeconds: wall,
            speed: wall > 0 ? summary.duration / wall : 0, file: info)
        if json {
            print(encodeJSON(result))
        } else {
            printHuman(result)
        }
    }

    /// Applies --size and --fps under the configuration lock.
    private func configure(_ device: CaptureDevice) throws(CaptureError) {
        guard size != nil || fps != nil else { return }
        let dimensions = size.flatMap(Dimensions.init(parsing:))
        guard let format = device.format(matching: dimensions, frameRate: fps) else {
            let available = device.formats.map { "\($0.formatDescription) \($0.frameRateRanges)" }.joined(separator: "; ")
            throw .formatNotSupported("\(device.uniqueID) has no format \(size ?? "any size") at \(fps.map(String.init) ?? "any") fps (it has: \(available))")
        }
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        try device.setActiveFormat(format)
        if let fps { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: Int32(fps))) }
    }

    private func fpsText(_ d: MediaTime) -> String {
        String(format: "%g", 1 / d.seconds)
    }

    private func printHuman(_ s: Summary) {
        print("Recorded \(s.output): \(String(format: "%.3f", s.recording.duration)) s, \(s.recording.fileSize) bytes, "
              + "\(s.recording.videoFrames) video frames, \(s.recording.audioSamples) audio samples")
        print("  in \(String(format: "%.2f", s.wallSeconds)) s wall time (\(String(format: "%.2f", s.speed))x real time, pace \(s.pace), seed \(s.seed), preset \(s.preset))")
        if let c = s.camera { print("  camera      \(c): \(s.cameraFormat ?? "")") }
        if let m = s.microphone { print("  microphone  \(m): \(s.microphoneFormat ?? "")") }
        print("  file: \(s.file.formatName), \(s.file.duration.map { String(format: "%.3f s", $0) } ?? "?")")
        for st in s.file.streams {
            var line = "    #\(st.index) \(st.mediaType) \(st.codec)"
            if let w = st.width, let h = st.height { line += " \(w)x\(h)" }
            if let pf = st.pixelFormat { line += " \(pf)" }
            if let r = st.sampleRate { line += " \(r) Hz" }
            if let c = st.channels { line += " \(c) ch" }
            if let n = st.frameCount { line += ", \(n) frames" }
            if let d = st.duration { line += ", \(String(format: "%.3f", d)) s" }
            if let b = st.bitrate { line += ", \(b / 1000) kb/s" }
            print(line)
        }
    }
}
