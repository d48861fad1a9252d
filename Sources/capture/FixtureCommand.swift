import ArgumentParser
import CaptureKit
import Foundation

struct FixtureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fixture", abstract: "Record what devices delivered into a replayable fixture, or describe one.",
        discussion: "Replay a fixture anywhere a device is accepted: --camera fixture:PATH (add #microphone for its audio, ?loop=1 to loop).",
        subcommands: [FixtureRecordCommand.self, FixtureInfoCommand.self])
}

struct FixtureRecordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "record",
        abstract: "Record a camera and/or microphone, buffers exactly as delivered, into a fixture file (NUT).",
        discussion: """
            SIGINT (Ctrl-C), SIGTERM, SIGHUP and SIGQUIT end the recording early: the fixture is \
            finished with every buffer it took (stopped: requested, exit 0), as at the end of --duration.
            """)

    @Option(help: "Camera unique ID (any device: sim:webcam, /dev/video0, fixture:…).")
    var camera: String?

    @Option(help: "Microphone unique ID.")
    var microphone: String?

    @Option(help: "WxH@FPS[:FOURCC]: the camera format, e.g. 1280x720@30:MJPG.")
    var format: String?

    @Option(name: .customLong("control"), help: "KEY=VALUE, repeatable: applied under the configuration lock before recording.")
    var controls: [String] = []

    @Option(help: "Seconds to record.")
    var duration: Double

    @Option(help: "virtual or realtime (default: realtime, as a device).")
    var pace: CapturePace = .realtime

    @Option(help: "Seed for the simulator's content.")
    var seed: UInt64 = 0

    @Option(name: .customLong("sim-drop-frame"), help: "Simulator fault, repeatable: the camera loses this frame index.")
    var simDropFrames: [Int64] = []

    @Option(name: .customLong("sim-jitter-us"), help: "Simulator fault: each frame's timestamp moves by up to ± this many µs (seeded).")
    var simJitter: Int64 = 0

    @Option(help: ArgumentHelp("Also record this movie (.mp4/.mov) from the same session: the original recording a replay of the fixture must reproduce.",
                               discussion: "H.264 (preset \(Self.movieSettings.preset)) + AAC, beginning with the fixture's first video frame and lasting --duration; the fixture then records 0.5 s more, so it holds all of the movie."))
    var movie: String?

    @Flag(help: "Print the summary as JSON.")
    var json = false

    @OptionGroup var status: StatusOptions

    @Argument(help: "Output fixture file (.nut).")
    var output: String

    /// The movie settings of `--movie`: a replay into a `MovieFileOutput` with these settings and
    /// `maxRecordedDuration` = --duration gives the same file.
    static var movieSettings: MovieFileOutput.Settings {
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        return settings
    }

    struct Output: Codable {
        var fixture: FixtureRecordingOutput.Summary
        var movie: RecordingSummary?
    }

    func validate() throws {
        guard camera != nil || microphone != nil else { throw ValidationError("give --camera, --microphone or both") }
        guard duration > 0, duration.isFinite else { throw ValidationError("--duration must be a positive number of seconds") }
    }

    func run() async throws {
        let scenario = SimulatorScenario()
        if let camera, camera.hasPrefix("sim:"), !simDropFrames.isEmpty || simJitter != 0 {
            scenario.setVideoFaults(.init(droppedFrames: Set(simDropFrames), jitterMicroseconds: simJitter), for: camera)
        }
        let registry = CaptureKit.makeRegistry(seed: seed, scenario: scenario)
        let session = CaptureSession(pace: pace)
        let fixture = FixtureRecordingOutput()
        let summary: FixtureRecordingOutput.Summary
        var movieSummary: RecordingSummary?
        do throws(CaptureError) {
            try session.setSessionPreset(.inputPriority)
            if let camera {
                let device = try registry.device(uniqueID: camera)
                try session.addInput(CaptureDeviceInput(device: device))
                try ControlOptions.configure(device, format: format, controls: controls)
            }
            if let microphone {
                try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: microphone)))
            }
            let limit = MediaTime(seconds: duration, preferredTimescale: 1_000_000)
            fixture.maxRecordedDuration = movie == nil ? limit : limit + MediaTime(value: 1, timescale: 2)
            try session.addOutput(fixture)
            let movieOutput = MovieFileOutput()
            let movieDelegate = MovieDelegate()
            if movie != nil {
                movieOutput.settings = Self.movieSettings
                movieOutput.maxRecordedDuration = limit
                try session.addOutput(movieOutput)
            }
            try session.startRunning()
            defer { session.stopRunning() }
            // SIGINT, SIGTERM, SIGHUP, SIGQUIT: the fixture is finished (its end record written) with
            // what it holds, stop reason requested, exit 0 (StopSignals); the --movie with it.
            let interrupt = StopSignals { _ = try? fixture.stopRecording() }
            defer { interrupt.cancel() }
            // The movie starts the moment the fixture is armed (opening the fixture writer can take
            // a while), so both begin with the next buffer; the check below catches the rare frame
            // that arrives between the two.
            let began = Locked<Date?>(nil)
            let realtime = pace == .realtime, hasCamera = camera != nil
            let reporter = StatusReporter(mode: status.mode) { [output] in
                guard let start = began.withLock({ $0 }), fixture.isRecording else { return nil }
                let elapsed = Date().timeIntervalSince(start)
                // Buffers are stored as they arrive: in real time the media so far is the time so far.
                return CaptureStatus(elapsed: elapsed, mediaSeconds: realtime ? elapsed : nil, frames: hasCamera ? fixture.buffersRecorded.first : nil,
                                     fileSize: StatusReporter.fileSize(output))
            }
            defer { reporter?.stop() }
            summary = try await fixture.record(to: output) {
                began.withLock { $0 = Date() }
                if let movie { movieOutput.startRecording(to: movie, recordingDelegate: movieDelegate) }
                printError("capture: recording fixture to \(output) (armed \(String(format: "%.3f", ProcessClock.secondsSinceLaunch())) s after launch)")
                // A signal that came before the recording was armed (there was nothing to stop yet).
                if interrupt.received != nil { _ = try? fixture.stopRecording() }
            }
            reporter?.stop()
            if let movie {
                session.stopRunning()
                let recorded = try await movieDelegate.result().get()
                movieSummary = recorded
                let contents = try FixtureReader.read(path: output)
                let firstFrame = contents.devices.indices.first { contents.devices[$0].description.mediaType == .video }
                    .flatMap { contents.samples[$0].first?.presentationTime.seconds }
                guard let firstFrame, let start = recorded.startTime, abs(firstFrame - start) < 1e-6 else {
                    throw CaptureError.invalidState("\(movie) began at PTS \(recorded.startTime ?? .nan) s but the fixture's first video frame "
                                                    + "is at \(firstFrame ?? .nan) s (a frame arrived between the two starts): record again")
                }
            }
        } catch {
            throw CommandFailure(error)
        }
        if json {
            print(movie == nil ? encodeJSON(summary, command: "fixture record") : encodeJSON(Output(fixture: summary, movie: movieSummary), command: "fixture record"))
        } else {
            print("Recorded fixture \(summary.path): \(summary.buffers.map(String.init).joined(separator: " + ")) buffers, "
                  + "\(summary.controlChanges) control changes, \(summary.fileSize) bytes, stopped: \(summary.stopReason)")
            if let movieSummary {
                print("Recorded movie \(movieSummary.path): \(movieSummary.videoFrames) video frames, \(movieSummary.audioSamples) audio samples, "
                      + "\(movieSummary.fileSize) bytes, stopped: \(movieSummary.stopReason)")
            }
        }
    }
}

/// Waits for a movie recording's single `didFinishRecording`.
private final class MovieDelegate: CaptureFileOutputRecordingDelegate {
    private struct State {
        var result: Result<RecordingSummary, CaptureError>?
        var waiter: CheckedContinuation<Result<RecordingSummary, CaptureError>, Never>?
    }

    private let state = Locked(State())

    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        let result: Result<RecordingSummary, CaptureError> = if let error, !error.recordingFinishedSuccessfully { .failure(error) } else { .success(summary) }
        let waiter = state.withLock { s in
            defer { s.waiter = nil }
            if s.waiter == nil { s.result = result }
            return s.waiter
        }
        waiter?.resume(returning: result)
    }

    func result() async -> Result<RecordingSummary, CaptureError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { s in
                if s.result == nil { s.waiter = continuation }
                return s.result
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}

struct FixtureInfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "info", abstract: "Describe what a fixture holds.")

    @Flag(help: "Print as JSON.")
    var json = false

    @Argument(help: "The fixture file.")
    var fixture: String

    struct Info: Codable {
        struct Device: Codable {
            var uniqueID: String
            var name: String
            var mediaType: String
            var activeFormat: String
            var frameDuration: String
            var formats: Int
            var controls: Int
            var buffers: Int
            var drops: Int
            /// Video: frames missing from the sequence numbers (V4L2 reports its drops this way).
            var sequenceGaps: Int
            var firstPTS: Double?
            var lastPTS: Double?
            var bytes: Int
        }
        var path: String
        var version: Int
        var span: Double
        var devices: [Device]
        var controlChanges: Int
    }

    func run() throws {
        let contents: FixtureContents
        do {
            contents = try FixtureReader.read(path: fixture)
        } catch {
            throw CommandFailure(error)
        }
        let devices = contents.devices.enumerated().map { index, device -> Info.Device in
            let samples = index < contents.samples.count ? contents.samples[index] : []
            return Info.Device(
                uniqueID: device.description.uniqueID, name: device.description.localizedName,
                mediaType: device.description.mediaType.rawValue,
                activeFormat: "\(device.activeFormat.formatDescription)", frameDuration: "\(device.frameDuration)",
                formats: device.description.formats.count, controls: device.controls.count, buffers: samples.count,
                drops: samples.reduce(0) { $0 + ($1.discontinuity?.count ?? 0) },
                sequenceGaps: device.description.mediaType == .video
                    ? zip(samples.dropFirst(), samples).reduce(0) { $0 + Int(max(0, $1.0.sequenceNumber - $1.1.sequenceNumber - 1)) } : 0,
                firstPTS: samples.first?.presentationTime.seconds, lastPTS: samples.last?.presentationTime.seconds,
                bytes: samples.reduce(0) { $0 + $1.data.count })
        }
        let info = Info(path: fixture, version: contents.version, span: contents.span.seconds, devices: devices,
                        controlChanges: contents.controlChanges.count)
        if json {
            print(encodeJSON(info, command: "fixture info"))
            return
        }
        print("\(info.path): CaptureKit fixture version \(info.version), \(String(format: "%.3f", info.span)) s, \(info.controlChanges) control changes")
        for d in devices {
            print("  \(d.uniqueID) (\(d.mediaType), \(d.name)): \(d.activeFormat) every \(d.frameDuration); "
                  + "\(d.buffers) buffers, \(d.bytes) bytes, \(d.drops) dropped"
                  + (d.mediaType == "video" ? ", \(d.sequenceGaps) missing from the sequence" : "") + "; \(d.formats) formats, \(d.controls) controls")
        }
    }
}
