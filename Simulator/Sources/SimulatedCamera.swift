import CaptureCore
import Foundation

/// An opened simulated camera: its controls (as data), the auto controllers and the camera model
/// that turns them into `CameraEffects` for each frame.
///
/// State lives in one lock (`Locked`). A stream takes a snapshot per frame (`beginFrame`), renders with it,
/// and feeds the frame's statistics back (`endFrame`): auto exposure, autofocus and auto white
/// balance are controllers stepped once per frame, so they are deterministic functions of the
/// frame sequence (no wall clock). Exposure is E = duration × ISO ("ISO-seconds"): at scene
/// luminance 1, E = 1 (1/100 s at ISO 100) renders reflectances as they are.
final class SimulatedCamera: ControlReportingDevice {
    let profile: SimulatedDeviceProfile
    let capabilities: SimulatedCameraCapabilities
    let seed: UInt64
    let scenario: SimulatorScenario
    let compressor: (any FrameCompressor)?
    let controls: [ControlDescription]
    let state: Locked<State>
    let reporting = Locked(ReportState())

    /// The report handler and the values the last report to it was made from: a report carries
    /// only what changed since (every value in a handler's first), so a frame hashes no control
    /// that did not change (measured: 16.4 M of 5 970 M instructions recording 10 s at 640x480).
    struct ReportState {
        /// Boxed: returning a bare closure out of `Mutex.withLock` (before `Locked` replaced it) leaked a 32-byte
        /// context per call on this toolchain (two per frame; found by ci/soak + heaptrack: 115 kB a
        /// minute of video), a class reference does not.
        var handler: ReportHandler?
        var reported: [(ControlID, ControlValue)] = []

        /// The entries of `values` that differ from `reported`'s (all of them when the lists are
        /// not the same controls in the same order).
        func changes(to values: [(ControlID, ControlValue)]) -> [ControlID: ControlValue] {
            guard reported.count == values.count else { return Dictionary(values, uniquingKeysWith: { $1 }) }
            var changed: [ControlID: ControlValue] = [:]
            for (old, new) in zip(reported, values) where old.0 != new.0 || old.1 != new.1 { changed[new.0] = new.1 }
            return changed
        }
    }

    final class ReportHandler: Sendable {
        let call: @Sendable (ControlReport) -> Void
        init(_ call: @escaping @Sendable (ControlReport) -> Void) { self.call = call }
    }

    struct Settings {
        var focusMode: FocusMode
        var lensTarget: Double
        var focusPOI = CapturePoint.center
        var smoothAutoFocus = false
        var exposureMode: ExposureMode
        var customDuration: Double
        var customISO: Double
        var bias = 0.0
        var exposurePOI = CapturePoint.center
        var whiteBalanceMode: WhiteBalanceMode
        var lockedGains = WhiteBalanceGains.unity
        var torchMode = TorchMode.off
        var torchLevel = 1.0
        var zoom = 1.0
        var rampTarget = 1.0
        var rampRate = 0.0
        var monitoring = false
        var scene: SimulatedScene
        /// `scene.shakeAmplitude`, pixels.
        var shakeAmplitude = 0.0
        /// What the session's connections ask for (`stabilization.mode`); the frame clamps it to its format.
        var stabilization = VideoStabilizationMode.off
        var items = SceneItemSettings()
    }

    struct AFSweep {
        var positions: [Double]
        var index = 0
        var best = 0.0
        var bestScore = -1.0
        var fine = false
    }

    struct Live {
        var lens: Double
        var sweep: AFSweep?
        var afReference: Double?
        var afLowFrames = 0
        var afRestart = false
        var exposure = 1.0
        var duration: Double
        var iso: Double
        var aeAdjusting: Bool
        var targetOffset = 0.0
        var gains = WhiteBalanceGains.unity
        var awbAdjusting: Bool
        var grayWorld = WhiteBalanceGains.unity
        var torchLevel = 0.0
        var sceneChanged = false
        var lumaReference: Double?
    }

    struct State {
        var settings: Settings
        var live: Live
        var revision: UInt64 = 0
        /// Frames begun or ended: with `revision`, says whether a frame planned ahead still holds.
        var frameSteps: UInt64 = 0
    }

    /// A frame planned on a copy of the state (`planAhead`), to be rendered ahead of its turn:
    /// it holds only if nothing changed the state before `commit`.
    struct PlannedFrame {
        let plan: FramePlan
        let after: State
        let revision: UInt64
        let frameSteps: UInt64
    }

    /// What one frame is made with.
    struct FramePlan {
        var revision: UInt64
        var effects: CameraEffects
        var exposureSeconds: Double
        var metering: MeteringRequest
        var values: [(ControlID, ControlValue)]
        var minISO, maxISO, minDuration, aeMaxDuration: Double
        var width: Int
        var shakeAmplitude = 0.0
        /// The stabilization in effect for this frame: the requested mode if the format has it, else off.
        var stabilization = VideoStabilizationMode.off
        var items: SceneItemSettings
    }

    init(profile: SimulatedDeviceProfile, capabilities: SimulatedCameraCapabilities, seed: UInt64, scenario: SimulatorScenario,
         compressor: (any FrameCompressor)? = nil) {
        self.compressor = compressor
        self.profile = profile
        self.capabilities = capabilities
        self.seed = seed
        self.scenario = scenario
        let format = profile.formats[profile.defaultFormatIndex]
        let scene = profile.scene
        let focus = Self.focusLens(distance: scene.subjectDistance, closest: capabilities.closestFocusDistance)
        // Start from the exposure that renders the scene as authored, in the format's limits.
        let iso = min(max(100, format.minISO), format.maxISO)
        let duration = 1 / (100 * scene.luminance) * 100 / iso
        let settings = Settings(focusMode: capabilities.focusModes.isEmpty ? .locked : capabilities.defaultFocusMode,
                                lensTarget: focus, exposureMode: capabilities.defaultExposureMode,
                                customDuration: duration, customISO: iso, whiteBalanceMode: capabilities.defaultWhiteBalanceMode,
                                scene: scene, items: scene.items)
        let live = Live(lens: focus, exposure: duration * iso, duration: duration, iso: iso,
                        aeAdjusting: [.autoExpose, .continuousAutoExposure].contains(capabilities.defaultExposureMode),
                        awbAdjusting: [.autoWhiteBalance, .continuousAutoWhiteBalance].contains(capabilities.defaultWhiteBalanceMode))
        state = Locked(State(settings: settings, live: live))
        controls = Self.describeControls(profile: profile, capabilities: capabilities, settings: settings)
    }

    var description: DeviceDescription { profile.deviceDescription }

    var controlRevision: UInt64 { state.withLock { $0.revision } }

    func setControlReportHandler(_ handler: (@Sendable (ControlReport) -> Void)?) {
        let boxed = handler.map(ReportHandler.init)
        reporting.withLock { $0 = ReportState(handler: boxed) }
    }

    func acquireConfigurationPriority() throws(CaptureError) {
        if let holder = scenario.externalLockHolder(profile.uniqueID) {
            throw .lockedByAnotherClient(device: profile.uniqueID, holder: holder)
        }
    }

    func releaseConfigurationPriority() {}

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        try scenario.requireAuthorization(.video)
        return SimulatedVideoStream(camera: self, setup: try makeSetup(configuration))
    }

    /// Checks a stream configuration and builds what renders it (at start, and for a live format change).
    func makeSetup(_ configuration: StreamConfiguration) throws(CaptureError) -> SimulatedStreamSetup {
        guard description.formats.contains(configuration.format) else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(profile.uniqueID)")
        }
        guard let pixelFormat = configuration.format.pixelFormat, let size = configuration.format.dimensions else {
            throw .formatNotSupported("camera stream needs a video format")
        }
        if pixelFormat == .mjpeg && compressor == nil {
            throw .formatNotSupported("\(profile.uniqueID) lists MJPEG formats as a UVC webcam does, but this simulator has no "
                                      + "JPEG compressor (CaptureKit.makeRegistry gives it one); choose the YUYV format of the same size")
        }
        guard configuration.format.supports(frameDuration: configuration.frameDuration) else {
            throw .formatNotSupported("frame duration \(configuration.frameDuration) on \(configuration.format.formatDescription)")
        }
        // The seed is mixed with the device ID so two simulated cameras differ.
        // MJPEG: rendered as I420, then compressed frame by frame.
        let renderer = try SyntheticFrameRenderer(pixelFormat: pixelFormat == .mjpeg ? .yuv420 : pixelFormat, dimensions: size,
                                                  frameDuration: configuration.frameDuration,
                                                  seed: seed ^ SimulatorDriver.hash(profile.uniqueID))
        return SimulatedStreamSetup(configuration: configuration, renderer: renderer,
                                    compressor: pixelFormat == .mjpeg ? compressor : nil)
    }
}
