import CaptureKit
import Foundation

/// A capture session on simulated devices that a test drives step by step in virtual time, in
/// the spirit of GStreamer's GstHarness and SwiftNIO's EmbeddedChannel: make it from a
/// configuration (seed, devices, `FaultTimeline`, outputs), `start()`, `advance(by:)` /
/// `advance(toFrame:)`, `push` faults, then `finish()` and read what the outputs received as
/// plain values for `#expect` — `recording.missingFrames == [10]`, `delivered.frameCount == 89`.
///
/// `advance` blocks its caller until the step is delivered (as `CaptureSession.advance` does);
/// `finish()` is async. Not thread-safe: drive one harness from one task or thread.
public final class CaptureHarness {
    /// What to capture with and what outputs to attach.
    public struct Configuration: Sendable {
        public var seed: UInt64 = 0
        /// `.virtual` (stepped, deterministic) or `.realtime` (real devices; `advance` waits wall time).
        public var pace: CapturePace = .virtual
        /// A camera's unique ID (`sim:back`, `fixture:PATH`, `/dev/video0`); nil: no camera.
        public var camera: String? = "sim:back"
        /// `WxH@FPS[:FOURCC]` (nil: the camera's default format).
        public var cameraFormat: String? = "640x480@30"
        /// `KEY=VALUE` controls applied before the session starts.
        public var cameraControls: [String] = []
        /// `SECONDS:KEY=VALUE` changes while running (`capture record --control-at`).
        public var controlTimeline: [String] = []
        /// A microphone's unique ID (`sim:mic`); nil: no microphone.
        public var microphone: String? = "sim:mic"
        /// Simulator profiles added to the built-in ones (a scenario's own devices).
        public var extraProfiles: [SimulatedDeviceProfile] = []
        /// What goes wrong, and when (`SimulatorScenario.faults`).
        public var faults = FaultTimeline()
        /// The authorization status the run starts with (both media types).
        public var authorization: AuthorizationStatus = .authorized
        /// Record a movie to this path (its extension picks the container); nil: no movie output.
        public var moviePath: String?
        /// `copy` the camera's MJPEG frames (MOV/MKV) or encode (`h264`, `mjpeg`, `hevc`); nil: automatic.
        public var movieCodec: String?
        public var moviePreset: VideoEncoderSettings.Preset = .ultrafast
        /// Seconds per movie fragment (0: unfragmented).
        public var movieFragmentInterval: Double = 1
        /// Attach a video / audio data output that records every sample's sequence number and PTS.
        public var videoData = true
        public var audioData = true
        /// Attach a metadata output finding these types (empty: none).
        public var metadataTypes: [MetadataObjectType] = []

        public init() {}
    }


    public let configuration: Configuration
    /// The simulator's script: permissions, plugs, locks and `faults`.
    public let scenario: SimulatorScenario
    public let registry: DeviceRegistry
    public let session: CaptureSession
    public private(set) var camera: CaptureDevice?
    public private(set) var microphone: CaptureDevice?
    public let movie: MovieFileOutput?
    public let metadataOutput: MetadataOutput?
    /// Virtual time stepped so far (seconds of PTS from the start).
    public private(set) var now: MediaTime = .zero

    private let collector = Collector()
    private let recordingDelegate = RecordingDelegate()
    private var controlTimeline: ControlTimeline?
    private var eventTask: Task<Void, Never>?
    private var started = false
    private var running = false
    private var startError: CaptureError?
    /// Faults injected into a real V4L2 camera in real time, in time order, and the wall-clock
    /// instant the run started (what their times count from).
    private var hardwareFaults: [HardwareFault] = []
    private var startedAt: ContinuousClock.Instant?

    /// A timeline event the harness fires itself on a V4L2 camera: one of vivid's error-injection
    /// buttons, pressed through a second client of the node (as another program would).
    struct HardwareFault {
        var seconds: Double
        var device: String
        var control: String
        var fault: Fault
    }

    /// vivid's error-injection controls for the timeline's faults that a V4L2 driver can be made
    /// to produce on cue, the first one the camera has wins: the buffer-error button is "Inject
    /// V4L2_BUF_FLAG_ERROR" in current kernels (6.1 in the VM), "Inject VIDIOC_DQBUF Error" in older ones.
    static let v4l2FaultControls: [String: [String]] = [
        "unplug": ["disconnect"],
        "bufferError": ["inject_v4l2_buf_flag_error", "inject_vidioc_dqbuf_error"],
    ]

    /// Builds the registry, the devices, the session and its outputs; throws what is wrong with
    /// the configuration (an unknown device, a format it lacks, a control it refuses).
    public init(_ configuration: Configuration) throws(CaptureError) {
        self.configuration = configuration
        scenario = SimulatorScenario(authorization: configuration.authorization)
        scenario.faults = configuration.faults
        var profiles: [SimulatedDeviceProfile] = try SimulatedDeviceProfile.builtIn()
        profiles.append(contentsOf: configuration.extraProfiles)
        registry = DeviceRegistry(drivers: [SimulatorDriver(seed: configuration.seed, profiles: profiles, scenario: scenario,
                                                            compressor: JPEGFrameCompressor()),
                                            FixtureDriver(), V4L2Driver(), ALSADriver()])
        session = CaptureSession(pace: configuration.pace)
        try session.setSessionPreset(.inputPriority)
        movie = configuration.moviePath == nil ? nil : MovieFileOutput()
        metadataOutput = configuration.metadataTypes.isEmpty ? nil : MetadataOutput()
        if let id = configuration.camera {
            let device = try registry.device(uniqueID: id)
            guard device.hasMediaType(.video) else { throw .invalidArgument("\(id) is not a camera") }
            try Self.configure(device, format: configuration.cameraFormat, controls: configuration.cameraControls)
            try session.addInput(CaptureDeviceInput(device: device))
            camera = device
            if id.hasPrefix("/dev/video") { hardwareFaults = try Self.hardwareFaults(configuration, camera: device) }
        }
        if let id = configuration.microphone {
            let device = try registry.device(uniqueID: id)
            guard device.hasMediaType(.audio) else { throw .invalidArgument("\(id) is not a microphone") }
            try session.addInput(CaptureDeviceInput(device: device))
            microphone = device
        }
        guard camera != nil || microphone != nil else { throw .noInputs }
        if let movie {
            var settings = MovieFileOutput.Settings()
            switch configuration.movieCodec {
            case nil: settings.videoMode = .automatic
            case "copy": settings.videoMode = .passthrough
            case "h264": settings.codec = .h264
            case "mjpeg": settings.codec = .mjpeg
            case "hevc": settings.codec = .hevc
            case let other?: throw .invalidArgument("movie codec '\(other)' is not one of copy, h264, mjpeg, hevc")
            }
            settings.preset = configuration.moviePreset
            movie.settings = settings
            // The timeline's disk and encoder faults are the movie's to apply.
            movie.outputFaults = configuration.faults.outputFaults
            movie.movieFragmentInterval = configuration.movieFragmentInterval > 0
                ? MediaTime(seconds: configuration.movieFragmentInterval, preferredTimescale: 1_000_000) : .invalid
            try session.addOutput(movie)
        }
        if configuration.videoData, camera != nil {
            let output = VideoDataOutput()
            output.setSampleBufferDelegate(collector, queue: collector.videoQueue)
            try session.addOutput(output)
        }
        if configuration.audioData, microphone != nil {
            let output = AudioDataOutput()
            output.setSampleBufferDelegate(collector, queue: collector.audioQueue)
            try session.addOutput(output)
        }
        if let metadataOutput {
            try session.addOutput(metadataOutput)
            try metadataOutput.setMetadataObjectTypes(configuration.metadataTypes)
            metadataOutput.setMetadataObjectsDelegate(collector, queue: collector.metadataQueue)
        }
        if !configuration.controlTimeline.isEmpty {
            guard let camera else { throw .invalidArgument("a control timeline needs a camera") }
            let timeline = try ControlTimeline(device: camera, entries: configuration.controlTimeline)
            try session.addOutput(timeline)
            controlTimeline = timeline
        }
        if configuration.pace == .virtual { try session.enableManualStepping() }
    }

    /// The timeline's events for a V4L2 camera, as error-injection presses; throws for a fault
    /// the driver cannot be made to produce, or a camera without vivid's controls.
    static func hardwareFaults(_ configuration: Configuration, camera: CaptureDevice) throws(CaptureError) -> [HardwareFault] {
        let id = camera.uniqueID
        var result: [HardwareFault] = []
        for event in configuration.faults.events where event.device == id {
            let name = event.fault.name
            guard let candidates = v4l2FaultControls[name] else {
                throw .invalidArgument("fault '\(name)' cannot be injected into \(id): a V4L2 camera takes unplug (vivid's disconnect) and bufferError (vivid's inject_v4l2_buf_flag_error) only")
            }
            guard configuration.pace == .realtime else {
                throw .invalidArgument("\(id) is a real camera: its faults fire in real time (pace realtime)")
            }
            guard let control = candidates.first(where: { camera.controlDescription(.custom($0)) != nil }) else {
                throw .invalidArgument("\(id) has no \(candidates.joined(separator: " or ")) control: fault '\(name)' needs vivid's error injection")
            }
            let seconds: Double
            switch event.at {
            case .time(let t): seconds = t.seconds
            case .frame(let n): seconds = Double(n) * camera.activeVideoMinFrameDuration.seconds
            }
            result.append(HardwareFault(seconds: seconds, device: id, control: control, fault: event.fault))
        }
        return result.sorted { $0.seconds < $1.seconds }
    }

    deinit {
        eventTask?.cancel()
        if session.isRunning { session.stopRunning() }
    }

    /// The camera's frame duration (seconds), 0 without a camera.
    public var frameDuration: Double { camera.map { $0.activeVideoMinFrameDuration.seconds } ?? 0 }

    /// Starts the session and the movie; nothing is delivered until the first `advance`.
    /// A start the devices refuse (not authorized, unplugged) throws and is also recorded in the
    /// result's errors at PTS 0.
    public func start() throws(CaptureError) {
        guard !started else { throw .invalidState("the harness is already started") }
        started = true
        let events = session.eventStream()
        let collector = self.collector
        // Real time: PTS and the hardware faults' moments count from the same instant.
        let startInstant = ContinuousClock.now
        if configuration.pace == .realtime {
            let origin = HostClock.now().seconds
            collector.state.withLock { $0.origin = origin }
        }
        // On its own thread, not the cooperative pool: tests and runners block pool threads in
        // `advance`, and events must be stamped while the step that caused them is current.
        eventTask = Task(executorPreference: EventExecutor.shared) { for await event in events { collector.record(event) } }
        do {
            try session.startRunning()
        } catch {
            // The session posts it as a runtime error too; `finish()` records it once.
            startError = error
            throw error
        }
        running = true
        startedAt = startInstant
        if let movie, let path = configuration.moviePath {
            OutputPath.removeRegularFile(path)  // an earlier run's movie; never a folder, link, FIFO or device (the recording then fails)
            movie.startRecording(to: path, recordingDelegate: recordingDelegate)
            // Accepted: recording (it starts on the first sample). Refused: its finish is on the way.
            if !movie.isRecording { _ = recordingDelegate.blockUntilFinished(seconds: 10) }
        }
    }

    /// Delivers every sample before `now + duration` and returns once the outputs have them.
    public func advance(by duration: MediaTime) throws(CaptureError) {
        now = now + duration
        let end = now.seconds
        collector.state.withLock { $0.stepEnd = end }
        if configuration.pace == .realtime {
            try sleepFiringHardwareFaults(until: end)
        } else {
            waitForScriptedResume()
            try session.advance(by: duration)
            try settleInterruption()
        }
        collector.settle()
    }

    /// Virtual pace: a step that an interruption cut short returns as soon as the session is
    /// interrupted, while the scripted end resumes it an instant later on another thread (and a
    /// stream fetching its next frame ahead can begin one just after a step). Waits for that
    /// resume and delivers the rest of the step, so every run sees the same frames.
    private func settleInterruption() throws(CaptureError) {
        guard session.isInterrupted || scenario.isInterruptionResumePending else { return }
        waitForScriptedResume()
        if session.isRunning { try session.advance(by: .zero) }
    }

    private func waitForScriptedResume() {
        let scenario = self.scenario
        blockUntil(timeout: .seconds(10)) { !scenario.isInterruptionResumePending }
    }

    /// Real time: waits until `seconds` after the start (wall clock), pressing the camera's
    /// error-injection controls at their moments on the way.
    private func sleepFiringHardwareFaults(until seconds: Double) throws(CaptureError) {
        guard let startedAt else { return }
        func wait(until t: Double) {
            let remaining = startedAt + .microseconds(Int64(t * 1e6)) - ContinuousClock.now
            if remaining > .zero { Thread.sleep(forTimeInterval: Double(remaining.components.seconds) + Double(remaining.components.attoseconds) / 1e18) }
        }
        while let next = hardwareFaults.first, next.seconds <= seconds {
            wait(until: next.seconds)
            hardwareFaults.removeFirst()
            // A second client of the node, as another program would press the button.
            try V4L2Driver().openDevice(uniqueID: next.device).setValue(.bool(true), for: .custom(next.control))
        }
        wait(until: seconds)
    }

    public func advance(by seconds: Double) throws(CaptureError) {
        try advance(by: MediaTime(seconds: seconds, preferredTimescale: 1_000_000))
    }

    /// Delivers until `count` video frames have come since the start.
    public func advance(toFrame count: Int) throws(CaptureError) {
        let target = MediaTime(seconds: Double(count) * frameDuration, preferredTimescale: 1_000_000)
        if target > now { now = target }
        let end = now.seconds
        collector.state.withLock { $0.stepEnd = end }
        waitForScriptedResume()
        try session.advance(toFrame: count)
        try settleInterruption()
        collector.settle()
    }

    /// Adds a fault to the timeline at the current virtual time (or `at`): the simulator and
    /// outputs apply it when their time reaches it. A running session holds each device's next
    /// sample already, so a fault pushed for "now" lands on the sample after that one; give `at`
    /// (a time or frame not reached yet) to place it exactly. Events already fired stay fired.
    /// Output faults (`diskFull`, `slowDisk`, `slowEncoder`) belong in `configuration.faults`: the
    /// movie output reads them when the harness is made.
    public func push(_ fault: Fault, device: String? = nil, at time: FaultTime? = nil) {
        scenario.addFault(FaultEvent(at: time ?? .time(now), device: device, fault: fault))
    }

    /// What the data outputs received so far.
    public var delivered: Delivered {
        collector.settle()
        return collector.state.withLock { $0.delivered }
    }

    /// Errors and interruptions reported so far.
    public var errors: [DeliveredError] { collector.state.withLock { $0.errors } }

    /// The control timeline's changes as applied (empty without one).
    public var appliedControls: [ControlTimeline.Applied] { controlTimeline?.applied ?? [] }

    /// `finish(analyze:)`'s body, run off the cooperative pool (see CaptureHarness+Async.swift).
    func finishOffPool(analyze: Bool) async -> Recording {
        if configuration.pace == .virtual { waitForScriptedResume() }
        let cutoff = now.seconds
        collector.state.withLock { $0.cutoff = cutoff }
        if let movie, running {  // a start the devices refused never asked for a recording
            movie.stopRecording()
            // The stop takes effect at the next sample.
            if configuration.pace == .virtual, session.isRunning {
                try? session.advance(by: MediaTime(seconds: max(frameDuration, 0.03), preferredTimescale: 1_000_000))
            }
            if !(await recordingDelegate.wait(seconds: 30)) {
                session.stopRunning()
                _ = await recordingDelegate.wait(seconds: 30)
            }
        }
        session.stopRunning()
        collector.settle()
        // Every event sent before `stopped` is recorded once the consumer has seen `stopped`.
        if running { await waitUntil(timeout: .seconds(5)) { collector.state.withLock { $0.sawStopped } } }
        if let startError {
            // A refused start: the session's own report of it, or ours when it has none.
            let type = Self.typeName(startError)
            await waitUntil(timeout: .seconds(1)) { collector.state.withLock { $0.errors.contains { $0.type == type } } }
            if !collector.state.withLock({ $0.errors.contains { $0.type == type } }) {
                collector.recordError(startError, source: "session", pts: 0)
            }
        }
        eventTask?.cancel()
        let summary = recordingDelegate.summary
        if let error = recordingDelegate.error {
            let kept: Double
            switch error {
            case .diskFull(_, _, let seconds), .writeFailed(_, _, _, let seconds): kept = seconds
            default: kept = summary.map { $0.duration + ($0.startTime ?? 0) } ?? 0
            }
            collector.recordError(error, source: "movie", pts: kept)
        }
        var recording = Recording(summary: summary, path: configuration.moviePath, delivered: delivered, errors: errors,
                                  frameDuration: frameDuration)
        if let camera { recording.damagedFrames = registry.driverEvents.droppedCount(deviceID: camera.uniqueID, reason: .corruptData) }
        if analyze, let path = configuration.moviePath, FileManager.default.fileExists(atPath: path),
           (summary?.fileIsUsable ?? false) {
            recording.file = try? MediaFileReader(path: path).info
            recording.analysis = try? Self.analyze(path)
        }
        return recording
    }

    /// Decodes a movie and recovers its frame stamps, sync markers and tone.
    public static func analyze(_ path: String) throws(CaptureError) -> RecordingReport {
        var analyzer = RecordingAnalyzer()
        let reader = try MediaFileReader(path: path)
        do {
            try reader.decode(
            video: { frame in
                analyzer.addVideoFrame(LumaPlane(base: frame.luma, width: frame.width, height: frame.height,
                                                 bytesPerRow: frame.bytesPerRow[0]),
                                       presentationTime: frame.presentationTime)
            },
            audio: { samples, channels, rate, start in
                let mono = channels == 1 ? samples : stride(from: 0, to: samples.count, by: channels).map { samples[$0] }
                analyzer.addAudio(mono, startTime: start, sampleRate: rate)
            })
        } catch let error as CaptureError {
            throw error
        } catch {
            throw .fileOperationFailed(path: path, reason: "cannot decode: \(error)")
        }
        return analyzer.report()
    }

    /// `WxH@FPS[:FOURCC]` then `KEY=VALUE` controls, under the configuration lock.
    static func configure(_ device: CaptureDevice, format: String?, controls: [String]) throws(CaptureError) {
        guard format != nil || !controls.isEmpty else { return }
        try device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        if let format {
            guard let request = FormatRequest(format) else {
                throw .invalidArgument("format '\(format)' must look like 640x480@30 or 640x480@30:MJPG")
            }
            let duration = request.frameDuration
            let wanted = request.fourcc.flatMap(PixelFormat.init(name:))
            let candidates = device.formats.filter { $0.dimensions == request.dimensions && $0.supports(frameDuration: duration) }
            guard let choice = candidates.first(where: { wanted == nil || $0.pixelFormat == wanted }) else {
                let available = device.formats.map { "\($0.formatDescription)" }
                throw .formatNotSupported("\(device.uniqueID) has no format \(format) (it has: \(available.joined(separator: "; ")))")
            }
            try device.setActiveFormat(choice)
            try device.setActiveVideoMaxFrameDuration(duration)
            try device.setActiveVideoMinFrameDuration(duration)
        }
        for entry in controls {
            guard let eq = entry.firstIndex(of: "="), eq != entry.startIndex else {
                throw .invalidArgument("control '\(entry)' must look like KEY=VALUE")
            }
            try device.applyControl(key: String(entry[..<eq]), value: String(entry[entry.index(after: eq)...]))
        }
    }

    /// The case name of an error (`deviceDisconnected`, `diskFull`, …).
    public static func typeName(_ error: CaptureError) -> String {
        if let label = Mirror(reflecting: error).children.first?.label { return label }
        switch error {
        case .noInputs: return "noInputs"
        case .sessionNotRunning: return "sessionNotRunning"
        case .alreadyRecording: return "alreadyRecording"
        case .noDataRecorded: return "noDataRecorded"
        case .streamEnded: return "streamEnded"
        case .recordingCancelled: return "recordingCancelled"
        default: return "\(error)"
        }
    }
}
