import ArgumentParser
import CaptureKit
import Foundation

struct RecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record video and/or audio to an MP4, MOV or MKV file.",
        discussion: """
            Encodes H.264 (libx264, yuv420p) and AAC. A camera that delivers MJPEG (e.g. --format \
            1920x1080@30:MJPG) is copied into MOV and MKV files without decoding or encoding (the \
            default there, or --video-codec copy); MP4 gets H.264. Copied video can be rotated only \
            through the display matrix (--rotation/--mirror, MOV). With --pace virtual the simulator \
            runs as fast as the encoder allows and the file is identical on every run for the same --seed.

            SIGINT (Ctrl-C), SIGTERM, SIGHUP and SIGQUIT (Ctrl-\\) end the recording as --duration \
            would: the file is finished and playable, the summary says stopped: requested, exit 0. A \
            damaged MJPEG frame from the camera is left out and counted, whether copied or encoded.

            Exit status: 0 recorded; 1 failed (nothing usable kept — a recording with no media is an error \
            and its empty file is removed —, or a write failed: the error says what was kept); 3 recorded and \
            plays, but the MP4/MOV could not be defragmented (e.g. no room on the disk for the copy): it keeps \
            its fragments, and the summary says why; 64 a bad option.
            """)

    @Option(help: "Camera unique ID (e.g. sim:back). Omit for audio only.")
    var camera: String?

    @Option(help: "Microphone unique ID (e.g. sim:mic). Omit for video only.")
    var microphone: String?

    // Unconditional: `--duration -1` is a value to refuse clearly, not an unknown option "-1".
    @Option(parsing: .unconditional, help: "Seconds of media to record.")
    var duration: Double

    @Option(help: "Frame size WxH; picks the camera format of that size.")
    var size: String?

    @Option(help: "Frames per second; must lie in the format's frame-rate ranges.")
    var fps: Int?

    @Option(help: "virtual (as fast as possible, deterministic) or realtime (paced like a device).")
    var pace: CapturePace = .realtime

    @Option(help: "Seed for the simulator's content.")
    var seed: UInt64 = 0

    @Option(help: "x264 preset: ultrafast, superfast, veryfast, faster, fast, medium. (default: veryfast in virtual pace; in real time the fastest-needed preset this machine sustains, measured before recording)")
    var preset: VideoEncoderSettings.Preset?

    @Option(help: "Average video bitrate in bits/s (default: constant quality, CRF 23).")
    var bitrate: Int?

    @Option(name: .customLong("max-duration"), help: "Stop at this many seconds of media with reason maximumDuration.")
    var maxDuration: Double?

    @Option(name: .customLong("max-file-size"), help: "Stop before the file exceeds this many bytes (reason maximumFileSize).")
    var maxFileSize: Int64?

    @Option(name: .customLong("frame-interval"), help: "Record 1 camera frame in N (those numbered a multiple of N), like ffmpeg's -r to a lower rate; the others are counted as skipped. In real time, frames the encoder cannot take are also dropped and counted once 64 MiB of frames wait for it.")
    var frameInterval: Int = 1

    @Option(name: .customLong("fragment-interval"), help: "Seconds per movie fragment; 0 writes an unfragmented file. (default: 10)")
    var fragmentInterval: Double = 10

    @Flag(name: .customLong("keep-fragments"), help: "Leave a fragmented MP4/MOV fragmented when it finishes (by default it becomes a regular movie, so every player hides the AAC priming).")
    var keepFragments = false

    @Option(help: "Clockwise rotation written to the track's display matrix: 0, 90, 180 or 270.")
    var rotation: Int = 0

    @Flag(help: "Mirror the video left-right (display matrix).")
    var mirror = false

    @Option(help: "Preferred stabilization: off, standard, cinematic, auto (active mode depends on the format).")
    var stabilization: VideoStabilizationMode = .off

    @Option(help: "Container: mp4, mov or mkv (default: from OUTPUT's extension).")
    var container: MovieContainer?

    /// `--video-codec`: copy the camera's frames or encode with one of the encoders.
    enum VideoCodecOption: String, CaseIterable, ExpressibleByArgument {
        case copy, h264, mjpeg, hevc
    }

    @Option(name: .customLong("video-codec"), help: "Video codec: copy (the camera's MJPEG frames as they are; MOV/MKV only), h264, mjpeg or hevc. (default: copy for an MJPEG camera into .mov/.mkv, otherwise h264)")
    var videoCodec: VideoCodecOption?

    @Option(name: .customLong("control"), help: "KEY=VALUE, repeatable: a camera control applied under the configuration lock before capture (see `capture controls DEVICE`).")
    var controls: [String] = []

    @Option(help: "WxH@FPS[:FOURCC]: the camera format and a constant frame rate, e.g. 1280x720@60:420f.")
    var format: String?

    @Option(name: .customLong("control-at"), help: "SECONDS:KEY=VALUE, repeatable: a change applied while recording, at that many seconds of media from the first frame. KEY is a control (as --control), format (WxH@FPS[:FOURCC]) or frameRate (FPS); the camera switches at the next frame boundary. A frame-rate change continues the file; a size or pixel-format change ends it (stop reason configurationChanged, the file complete).")
    var controlAt: [String] = []

    @Flag(help: "Print the summary as JSON.")
    var json = false

    @OptionGroup var status: StatusOptions

    @Flag(help: "Also find faces and codes (a metadata output) and write them as JSON lines next to the movie: OUTPUT without its extension + .metadata.jsonl.")
    var metadata = false

    @Option(name: .customLong("metadata-types"), help: "With --metadata: the types to find (as `capture scan --types`).")
    var metadataTypes: String = "qr,face"

    @Argument(help: "Output file (.mp4, .mov or .mkv).")
    var output: String

    struct Summary: Codable {
        var output: String
        var camera: String?
        var cameraFormat: String?
        var microphone: String?
        var microphoneFormat: String?
        var pace: String
        var seed: UInt64
        /// The video track as written, e.g. "mjpeg (copied from camera)" or "h264 (encoded)".
        var video: String?
        var preset: String
        /// Real time without --preset: how the preset was chosen (calibrated frames per second per preset).
        var encodingPolicy: RealtimeEncodingPolicy.Decision?
        /// Peak resident memory of this process, in megabytes.
        var peakRSSMegabytes: Double
        /// CPU time (user + system) this process used, in seconds.
        var cpuSeconds: Double
        var stabilization: String?
        /// `--control-at` changes as made: requested time, PTS of the first frame with the change.
        var controlTimeline: [ControlTimeline.Applied]?
        var recording: RecordingSummary
        /// Real-time pace: the most frames/buffers that ever waited for the encoder.
        var encoderQueueHighWater: Int
        var wallSeconds: Double
        var speed: Double
        var file: MediaFileInfo
        /// --metadata: the JSON-lines file, the objects written and how detection kept up.
        var metadataFile: String?
        var metadataObjects: Int?
        var metadataDetectionRate: Double?
        var metadataFramesSkipped: Int?
    }

    /// `--json` when the disk refused a write (the command still exits 1, the error on stderr).
    struct WriteFailureSummary: Codable {
        var output: String
        /// diskFull or writeFailed.
        var stopReason: String
        var errno: Int32
        var error: String
        /// Bytes left in the file, and the seconds of them that play (0: nothing plays).
        var bytesKept: Int64
        var secondsKept: Double
        var fileIsUsable: Bool

        init?(output: String, error: CaptureError) {
            switch error {
            case .diskFull(_, let bytes, let seconds):
                (stopReason, errno, bytesKept, secondsKept) = ("diskFull", ENOSPC, bytes, seconds)
            case .writeFailed(_, let code, let bytes, let seconds):
                (stopReason, errno, bytesKept, secondsKept) = ("writeFailed", code, bytes, seconds)
            default:
                return nil
            }
            self.output = output
            self.error = error.description
            fileIsUsable = secondsKept > 0
        }
    }

    func validate() throws {
        guard camera != nil || microphone != nil else { throw ValidationError("give --camera, --microphone or both") }
        guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be a positive number of seconds, not \(duration)") }
        if let size, Dimensions(parsing: size) == nil { throw ValidationError("--size must look like 1280x720, not '\(size)'") }
        if let fps, fps <= 0 || fps > FormatRequest.maximumFrameRate { throw ValidationError("--fps must be 1…\(FormatRequest.maximumFrameRate)") }
        if let bitrate, bitrate < 1000 {
            throw ValidationError("--bitrate is in bits per second and must be at least 1000 (the encoders count in kbit/s), not \(bitrate); e.g. 2000000 for 2 Mbit/s")
        }
        if let maxDuration, !(maxDuration > 0) { throw ValidationError("--max-duration must be positive") }
        if let maxFileSize, maxFileSize < Self.smallestFileSizeLimit {
            throw ValidationError("--max-file-size must be at least \(Self.smallestFileSizeLimit) bytes, not \(maxFileSize): a movie's header, first frame and index alone take several kilobytes, so a smaller limit cannot be kept")
        }
        guard frameInterval >= 1 else { throw ValidationError("--frame-interval must be 1 or more (1 records every frame), not \(frameInterval)") }
        guard fragmentInterval >= 0, fragmentInterval.isFinite else { throw ValidationError("--fragment-interval must be 0 or more seconds") }
        guard [0, 90, 180, 270].contains(rotation) else { throw ValidationError("--rotation must be 0, 90, 180 or 270, not \(rotation)") }
        let ext = (output as NSString).pathExtension.lowercased()
        if let container, ext != container.rawValue {
            throw ValidationError("--container \(container.rawValue) does not match the output's extension .\(ext)")
        }
    }

    /// The smallest `--max-file-size` taken (64 KiB): below it, the header, the first frame and
    /// the index the output keeps room for (4 KiB and more) would already pass the limit.
    static let smallestFileSizeLimit: Int64 = 65536

    /// Exit status when the recording is complete and plays but was left fragmented (its
    /// defragmentation failed; the summary says why).
    static let exitNotDefragmented: Int32 = 3

    func run() async throws {
        let requestedMetadataTypes = metadata ? try MetadataTypeOption.parse(metadataTypes) : []
        let registry = CaptureKit.makeRegistry(seed: seed)
        let session = CaptureSession(pace: pace)
        // The camera's default format unless --size/--fps choose another (not the `high` preset's).
        do { try session.setSessionPreset(.inputPriority) } catch { throw CommandFailure(error) }
        var cameraDevice: CaptureDevice?
        var micDevice: CaptureDevice?
        do throws(CaptureError) {
            if let camera {
                let device = try registry.device(uniqueID: camera)
                guard device.hasMediaType(.video) else {
                    throw .invalidArgument("--camera \(camera) is not a camera (it has no video); give a microphone with --microphone, a camera with --camera (run `capture devices`)")
                }
                try configure(device)
                try ControlOptions.configure(device, format: format, controls: controls)
                try session.addInput(CaptureDeviceInput(device: device))
                cameraDevice = device
            }
            if let microphone {
                let device = try registry.device(uniqueID: microphone)
                guard device.hasMediaType(.audio) else {
                    throw .invalidArgument("--microphone \(microphone) is not a microphone (it has no audio); give a camera with --camera (run `capture devices`)")
                }
                try session.addInput(CaptureDeviceInput(device: device))
                micDevice = device
            }
        } catch {
            throw CommandFailure(error)
        }
        if let camera = cameraDevice, frameInterval > 1 {
            // Frames numbered a multiple of N are kept: N frame periods must fit in the recording.
            let period = camera.activeVideoMinFrameDuration.seconds
            guard Double(frameInterval) * period <= duration + 1e-9 else {
                throw CommandFailure("--frame-interval \(frameInterval) keeps one frame every \(String(format: "%g", Double(frameInterval) * period)) s at \(fpsText(camera.activeVideoMinFrameDuration)) fps, longer than --duration \(String(format: "%g", duration)) s; use at most \(max(1, Int((duration / period + 1e-9).rounded(.down))))")
            }
        }
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        switch videoCodec {
        case nil: settings.videoMode = .automatic
        case .copy: settings.videoMode = .passthrough
        case .h264: settings.codec = .h264
        case .mjpeg: settings.codec = .mjpeg
        case .hevc: settings.codec = .hevc
        }
        // Copying needs no encoder, so no preset calibration either.
        let copying = cameraDevice.flatMap { camera in
            camera.activeFormat.pixelFormat.map { format in
                settings.resolvedVideoMode(sourceFormat: format,
                                           container: MovieContainer(pathExtension: (output as NSString).pathExtension) ?? .mp4) == .passthrough
            }
        } ?? false
        // Real time: choose the preset that keeps up here and now, unless the user chose one.
        var policy: RealtimeEncodingPolicy.Decision?
        if preset == nil, pace == .realtime, !copying, let camera = cameraDevice, let size = camera.activeFormat.dimensions {
            do {
                policy = try RealtimeEncodingPolicy.choose(dimensions: size, frameDuration: camera.activeVideoMinFrameDuration)
            } catch {
                throw CommandFailure(error)
            }
        }
        let chosenPreset = preset ?? policy.flatMap { VideoEncoderSettings.Preset(rawValue: $0.preset) } ?? .veryfast
        settings.preset = chosenPreset
        settings.videoBitrate = bitrate
        movie.settings = settings
        movie.videoFrameInterval = frameInterval
        // --duration ends the recording normally; --max-duration is the output's limit (a stop reason).
        let limit = min(duration, maxDuration ?? .infinity)
        movie.maxRecordedDuration = MediaTime(seconds: limit, preferredTimescale: 1_000_000)
        if let maxFileSize { movie.maxRecordedFileSize = maxFileSize }
        movie.keepsMovieFragments = keepFragments
        movie.movieFragmentInterval = fragmentInterval > 0
            ? MediaTime(seconds: fragmentInterval, preferredTimescale: 1_000_000) : .invalid
        let started = Date()
        var summary: RecordingSummary
        var activeStabilization: VideoStabilizationMode?
        var timeline: ControlTimeline?
        if !controlAt.isEmpty {
            guard let cameraDevice else { throw CommandFailure(.invalidArgument("--control-at needs --camera")) }
            do { timeline = try ControlTimeline(device: cameraDevice, entries: controlAt) } catch { throw CommandFailure(error) }
        }
        let metadataOutput = MetadataOutput()
        var metadataWriter: MetadataLinesWriter?
        do {
            try session.addOutput(movie)
            if let timeline { try session.addOutput(timeline) }
            if let video = movie.attachment.connections.first(where: { $0.mediaType == .video }) {
                try video.setVideoRotationAngle(rotation)
                try video.setVideoMirrored(mirror)
                video.preferredVideoStabilizationMode = stabilization
                activeStabilization = video.activeVideoStabilizationMode
            }
            if metadata, cameraDevice != nil {
                let path = Self.metadataPath(for: output)
                let writer = try MetadataLinesWriter(path: path, movie: movie)
                try session.addOutput(metadataOutput)
                try metadataOutput.setMetadataObjectTypes(requestedMetadataTypes)
                metadataOutput.setMetadataObjectsDelegate(writer, queue: writer.queue)
                metadataWriter = writer
            }
            try session.startRunning()
            defer { session.stopRunning() }
            // SIGINT, SIGTERM, SIGHUP, SIGQUIT: finish the file and exit 0 (StopSignals).
            let interrupt = StopSignals { movie.stopRecording() }
            defer { interrupt.cancel() }
            // One line on stderr when the first sample is in: scripts (and the crash tests) learn
            // when the recording really began, measured on this process's own clock.
            let began = Locked<Date?>(nil)
            let both = cameraDevice != nil && micDevice != nil, hasCamera = cameraDevice != nil
            let reporter = StatusReporter(mode: status.mode) {
                guard let start = began.withLock({ $0 }), movie.isRecording else { return nil }
                let live = movie.liveStatistics
                let drift = both ? live.lastVideoTime.flatMap { v in live.lastAudioEnd.map { v - $0 } } : nil
                return CaptureStatus(elapsed: Date().timeIntervalSince(start), mediaSeconds: movie.recordedDuration.seconds,
                                     frames: hasCamera ? live.videoFrames : nil,
                                     dropped: hasCamera ? live.droppedVideoFrames : nil,
                                     fileSize: movie.recordedFileSize, encoderQueue: movie.encoderQueueDepth.current,
                                     audioLevelDBFS: live.audioPeakDBFS, avDrift: drift)
            }
            defer { reporter?.stop() }
            summary = try await movie.record(to: output) { [output] in
                let line = "capture: recording to \(output) (first sample \(String(format: "%.3f", ProcessClock.secondsSinceLaunch())) s after launch)"
                printError(line)
                began.withLock { $0 = Date() }
                // A signal that came before the recording began (there was nothing to stop yet).
                if interrupt.received != nil { movie.stopRecording() }
            }
        } catch {
            // The disk refused a write: with --json, scripts still get what was kept (stdout).
            if json, let kept = WriteFailureSummary(output: output, error: error) { print(encodeJSON(kept, command: "record")) }
            throw CommandFailure(error)
        }
        session.stopRunning()
        if !summary.fileIsUsable {
            throw CommandFailure("\(output): the recording is not usable: \(summary.defragmentationError ?? "the file does not play")")
        }
        let metadataCount = metadataWriter?.finish(recordedDuration: summary.duration)
        if summary.stopReason == "maximumDuration" && limit == duration && (maxDuration ?? .infinity) > duration {
            summary.stopReason = "duration"
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
            pace: pace.rawValue, seed: seed,
            video: summary.videoCodec.map { $0 + (summary.videoPassthrough ? " (copied from camera)" : " (encoded)") },
            preset: chosenPreset.rawValue, encodingPolicy: policy,
            peakRSSMegabytes: Self.peakRSSMegabytes(), cpuSeconds: Self.cpuSeconds(), stabilization: activeStabilization?.rawValue,
            controlTimeline: timeline?.applied, recording: summary, encoderQueueHighWater: movie.encoderQueueDepth.highWater, wallSeconds: wall,
            speed: wall > 0 ? summary.duration / wall : 0, file: info,
            metadataFile: metadataWriter.map { _ in Self.metadataPath(for: output) }, metadataObjects: metadataCount,
            metadataDetectionRate: metadataWriter.map { _ in metadataOutput.statistics.detectionRate },
            metadataFramesSkipped: metadataWriter.map { _ in metadataOutput.statistics.framesSkipped })
        if json {
            print(encodeJSON(result, command: "record"))
        } else {
            printHuman(result)
        }
        if let problem = summary.defragmentationError {
            printError("capture record: \(output) is complete and plays, but it was not defragmented: \(problem)")
            throw ExitCode(Self.exitNotDefragmented)
        }
    }

    /// `dir/name.mov` → `dir/name.metadata.jsonl`.
    static func metadataPath(for output: String) -> String {
        (output as NSString).deletingPathExtension + ".metadata.jsonl"
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
        print("  stopped: \(s.recording.stopReason), file usable: \(s.recording.fileIsUsable)"
              + (s.pace == "realtime" ? ", encoder queue high-water mark \(s.encoderQueueHighWater)" : ""))
        if s.recording.fragmentsWritten > 0 {
            let after = s.recording.defragmentationError != nil ? " (defragmentation FAILED: the file keeps its fragments)"
                : s.output.lowercased().hasSuffix(".mkv") || keepFragments ? "" : " (then defragmented)"
            print("  fragments while recording: \(s.recording.fragmentsWritten)\(after), video encoder latency \(s.recording.videoEncoderLatencyFrames) frames")
        }
        print("  in \(String(format: "%.2f", s.wallSeconds)) s wall time (\(String(format: "%.2f", s.speed))x real time, pace \(s.pace), seed \(s.seed), \(s.recording.videoPassthrough ? "no video encoder" : "preset \(s.preset)")), peak RSS \(String(format: "%.0f", s.peakRSSMegabytes)) MB")
        if let p = s.encodingPolicy {
            let tried = p.candidatesTried.sorted { $0.value < $1.value }.map { "\($0.key) \(String(format: "%.0f", $0.value)) fps" }
            print("  real-time encoding policy: \(p.preset) (needs \(String(format: "%.0f", p.requiredFPS)) fps × 1.5; calibrated \(tried.joined(separator: ", ")))")
        }
        if s.recording.videoFramesSkipped > 0 || s.recording.videoFramesDroppedLate > 0 {
            print("  video frames left out: \(s.recording.videoFramesSkipped) skipped by the frame interval, \(s.recording.videoFramesDroppedLate) dropped with the encoder queue full")
        }
        if let c = s.camera { print("  camera      \(c): \(s.cameraFormat ?? "")") }
        for change in s.controlTimeline ?? [] {
            let at = change.mediaTime.map { String(format: "first frame at %.6f s", $0) } ?? "applied"
            print("  at \(change.time) s: \(change.change): " + (change.error.map { "failed: \($0)" } ?? at))
        }
        if let v = s.video { print("  video: \(v)") }
        if s.recording.invalidFramesSkipped > 0 {
            print("  \(s.recording.invalidFramesSkipped) damaged camera frames left out (first: \(s.recording.invalidFrameProblem ?? "?"))")
        }
        if let path = s.metadataFile {
            print("  metadata: \(s.metadataObjects ?? 0) objects in \(path) (detection \(String(format: "%.1f", s.metadataDetectionRate ?? 0)) fps, \(s.metadataFramesSkipped ?? 0) frames skipped)")
        }
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

    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
            + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// Peak resident set size (getrusage's ru_maxrss is in kilobytes on Linux).
    static func peakRSSMegabytes() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_maxrss) / 1024
    }
}
