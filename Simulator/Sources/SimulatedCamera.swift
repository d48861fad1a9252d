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
    private let state: Locked<State>
    private let reporting = Locked(ReportState())

    /// The report handler and the values the last report to it was made from: a report carries
    /// only what changed since (every value in a handler's first), so a frame hashes no control
    /// that did not change (measured: 16.4 M of 5 970 M instructions recording 10 s at 640x480).
    private struct ReportState {
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

    private final class ReportHandler: Sendable {
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

    // MARK: Controls as data

    static func describeControls(profile: SimulatedDeviceProfile, capabilities c: SimulatedCameraCapabilities,
                                 settings: Settings) -> [ControlDescription] {
        var list: [ControlDescription] = []
        func real(_ id: ControlID, _ lo: Double, _ hi: Double, _ d: Double, volatile: Bool = false, readOnly: Bool = false) {
            list.append(ControlDescription(id: id, kind: .real(min: lo, max: hi), defaultValue: .real(d), isVolatile: volatile, isReadOnly: readOnly))
        }
        func flag(_ id: ControlID, _ d: Bool, volatile: Bool = false, readOnly: Bool = false) {
            list.append(ControlDescription(id: id, kind: .bool, defaultValue: .bool(d), isVolatile: volatile, isReadOnly: readOnly))
        }
        func menu(_ id: ControlID, _ entries: [String], _ d: String, volatile: Bool = false) {
            list.append(ControlDescription(id: id, kind: .menu(entries), defaultValue: .menu(d), isVolatile: volatile))
        }
        let formats = profile.formats
        if !c.focusModes.isEmpty {
            menu(.focusMode, c.focusModes.map(\.rawValue), settings.focusMode.rawValue, volatile: true)
            real(.lensPosition, 0, 1, settings.lensTarget, volatile: true, readOnly: !c.hasLensPositionControl)
            flag(.isAdjustingFocus, false, volatile: true, readOnly: true)
            if c.hasSmoothAutoFocus { flag(.smoothAutoFocus, false) }
            if c.hasFocusPointOfInterest {
                real(.focusPointOfInterestX, 0, 1, 0.5)
                real(.focusPointOfInterestY, 0, 1, 0.5)
            }
        }
        menu(.exposureMode, c.exposureModes.map(\.rawValue), settings.exposureMode.rawValue, volatile: true)
        let minDuration = formats.map(\.minExposureDuration.seconds).min() ?? 0.0001
        let maxDuration = formats.map(\.maxExposureDuration.seconds).max() ?? 0.2
        real(.exposureDuration, minDuration, maxDuration, settings.customDuration, volatile: true, readOnly: !c.exposureModes.contains(.custom))
        real(.iso, formats.map(\.minISO).min() ?? 100, formats.map(\.maxISO).max() ?? 800, settings.customISO,
             volatile: true, readOnly: !c.exposureModes.contains(.custom))
        flag(.isAdjustingExposure, false, volatile: true, readOnly: true)
        real(.exposureTargetOffset, -16, 16, 0, volatile: true, readOnly: true)
        if let bias = c.exposureBias { real(.exposureTargetBias, bias.lowerBound, bias.upperBound, 0) }
        if c.hasExposurePointOfInterest {
            real(.exposurePointOfInterestX, 0, 1, 0.5)
            real(.exposurePointOfInterestY, 0, 1, 0.5)
        }
        menu(.whiteBalanceMode, c.whiteBalanceModes.map(\.rawValue), settings.whiteBalanceMode.rawValue, volatile: true)
        if c.hasWhiteBalanceGains {
            for id in [ControlID.whiteBalanceRedGain, .whiteBalanceGreenGain, .whiteBalanceBlueGain] {
                real(id, 1, c.maxWhiteBalanceGain, 1, volatile: true)
            }
        }
        if let t = c.whiteBalanceTemperature { real(.whiteBalanceTemperature, t.lowerBound, t.upperBound, 6500, volatile: true) }
        for id in [ControlID.grayWorldRedGain, .grayWorldGreenGain, .grayWorldBlueGain] {
            real(id, 1, 64, 1, volatile: true, readOnly: true)
        }
        flag(.isAdjustingWhiteBalance, false, volatile: true, readOnly: true)
        if !c.torchModes.isEmpty {
            menu(.torchMode, c.torchModes.map(\.rawValue), TorchMode.off.rawValue)
            real(.torchLevel, 0, 1, 0, volatile: true)
            real(.maxAvailableTorchLevel, 0, 1, 1, volatile: true, readOnly: true)
        }
        if c.hasZoom {
            let maxZoom = formats.map(\.videoMaxZoomFactor).max() ?? 1
            real(.zoomFactor, 1, maxZoom, 1, volatile: true)
            real(.zoomRampTarget, 1, maxZoom, 1)
            real(.zoomRampRate, 0, 64, 0)
            flag(.isRampingZoom, false, volatile: true, readOnly: true)
        }
        flag(.subjectAreaChangeMonitoring, false)
        real(.sceneIlluminant, 1000, 15000, settings.scene.illuminant)
        real(.sceneSubjectDistance, 0.01, 1000, settings.scene.subjectDistance)
        real(.sceneLuminance, 0.0001, 1000, settings.scene.luminance)
        real(.sceneMaxTorchLevel, 0, 1, settings.scene.maxTorchLevel)
        real(.sceneShakeAmplitude, 0, 64, 0)
        let stabilizing = Set(formats.flatMap(\.supportedStabilizationModes))
        menu(.videoStabilizationMode, VideoStabilizationMode.allCases.filter { $0 == .auto || stabilizing.contains($0) }.map(\.rawValue),
             VideoStabilizationMode.off.rawValue)
        list.append(ControlDescription(id: .sceneQRCode, kind: .text, defaultValue: .text("")))
        flag(.sceneFace, false)
        for key in ControlID.sceneItemNumberKeys {
            let defaults = key.hasPrefix("scene.qrCode") ? settings.items.qr : settings.items.facePlacement
            switch key.split(separator: ".").last! {
            case "x": real(.custom(key), -1, 2, defaults.x)
            case "y": real(.custom(key), -1, 2, defaults.y)
            case "size": real(.custom(key), 0.01, 2, defaults.size)
            case "rotation": real(.custom(key), -360, 360, defaults.rotation)
            default: real(.custom(key), -10, 10, defaults.motion)
            }
        }
        return list
    }

    func value(of control: ControlID) throws(CaptureError) -> ControlValue {
        guard controls.contains(where: { $0.id == control }) else {
            throw .controlNotSupported(device: profile.uniqueID, control: control.description, detail: "the device has no such control")
        }
        let values = state.withLock { Self.values($0, capabilities) }
        guard let value = values[control] else {
            throw .controlNotSupported(device: profile.uniqueID, control: control.description, detail: "no value")
        }
        return value
    }

    func setValue(_ value: ControlValue, for control: ControlID) throws(CaptureError) {
        guard let description = controls.first(where: { $0.id == control }), !description.isReadOnly else {
            throw .controlNotSupported(device: profile.uniqueID, control: control.description, detail: "not a settable control of this device")
        }
        let unsupported = CaptureError.valueOutOfRange(control: control.description, value: "\(value)", allowed: "\(description.kind)")
        let number = value.doubleValue
        let c = capabilities
        try state.withLock { (s: inout State) throws(CaptureError) in
            switch control {
            case .focusMode:
                guard let m = value.menuValue.flatMap(FocusMode.init(rawValue:)), c.focusModes.contains(m) else { throw unsupported }
                // Entering a mode freezes or restarts; re-setting the current mode changes nothing.
                if m != s.settings.focusMode {
                    if m == .locked { s.settings.lensTarget = s.live.lens; s.live.sweep = nil } else { s.live.afRestart = true }
                }
                s.settings.focusMode = m
            case .lensPosition:
                guard let v = number else { throw unsupported }
                s.settings.lensTarget = min(max(v, 0), 1)
                s.settings.focusMode = .locked
                s.live.sweep = nil
            case .smoothAutoFocus: s.settings.smoothAutoFocus = value.boolValue ?? false
            case .focusPointOfInterestX: s.settings.focusPOI.x = number ?? 0.5
            case .focusPointOfInterestY: s.settings.focusPOI.y = number ?? 0.5
            case .exposureMode:
                guard let m = value.menuValue.flatMap(ExposureMode.init(rawValue:)), c.exposureModes.contains(m) else { throw unsupported }
                if m != s.settings.exposureMode {
                    switch m {
                    case .custom: s.settings.customDuration = s.live.duration; s.settings.customISO = s.live.iso
                    case .autoExpose, .continuousAutoExposure: s.live.aeAdjusting = true
                    case .locked: s.live.aeAdjusting = false
                    }
                }
                s.settings.exposureMode = m
            case .exposureDuration:
                guard var v = number else { throw unsupported }
                if let unit = c.exposureUnit { v = max(unit, (v / unit).rounded() * unit) }
                s.settings.customDuration = v
                s.settings.exposureMode = .custom
            case .iso:
                guard let v = number else { throw unsupported }
                s.settings.customISO = v
                s.settings.exposureMode = .custom
            case .exposureTargetBias: s.settings.bias = number ?? 0
            case .exposurePointOfInterestX: s.settings.exposurePOI.x = number ?? 0.5
            case .exposurePointOfInterestY: s.settings.exposurePOI.y = number ?? 0.5
            case .whiteBalanceMode:
                guard let m = value.menuValue.flatMap(WhiteBalanceMode.init(rawValue:)), c.whiteBalanceModes.contains(m) else { throw unsupported }
                if m != s.settings.whiteBalanceMode {
                    if m == .locked { s.settings.lockedGains = s.live.gains; s.live.awbAdjusting = false } else { s.live.awbAdjusting = true }
                }
                s.settings.whiteBalanceMode = m
            case .whiteBalanceRedGain: s.settings.lockedGains.red = number ?? 1
            case .whiteBalanceGreenGain: s.settings.lockedGains.green = number ?? 1
            case .whiteBalanceBlueGain: s.settings.lockedGains.blue = number ?? 1
            case .whiteBalanceTemperature:
                let g = ColorScience.gains(for: TemperatureAndTint(temperature: number ?? 6500))
                s.settings.lockedGains = WhiteBalanceGains(red: min(g.red, c.maxWhiteBalanceGain), green: min(g.green, c.maxWhiteBalanceGain),
                                                           blue: min(g.blue, c.maxWhiteBalanceGain))
                if c.whiteBalanceModes.contains(.locked) { s.settings.whiteBalanceMode = .locked }
                s.live.awbAdjusting = false
            case .torchMode:
                guard let m = value.menuValue.flatMap(TorchMode.init(rawValue:)), c.torchModes.contains(m) else { throw unsupported }
                s.settings.torchMode = m
            case .torchLevel: s.settings.torchLevel = number ?? 1
            case .zoomFactor:
                s.settings.zoom = number ?? 1
                s.settings.rampRate = 0
            case .zoomRampTarget: s.settings.rampTarget = number ?? 1
            case .zoomRampRate: s.settings.rampRate = max(0, number ?? 0)
            case .subjectAreaChangeMonitoring: s.settings.monitoring = value.boolValue ?? false
            case .sceneIlluminant: s.settings.scene.illuminant = number ?? 6500; s.live.sceneChanged = true
            case .sceneSubjectDistance:
                s.settings.scene.subjectDistance = max(0.01, number ?? 1)
                s.live.sceneChanged = true
                if s.settings.focusMode == .continuousAutoFocus { s.live.afRestart = true }
            case .sceneLuminance: s.settings.scene.luminance = number ?? 1; s.live.sceneChanged = true
            case .sceneMaxTorchLevel: s.settings.scene.maxTorchLevel = min(max(number ?? 1, 0), 1)
            case .sceneShakeAmplitude: s.settings.shakeAmplitude = min(max(number ?? 0, 0), 64)
            case .videoStabilizationMode:
                guard let m = value.menuValue.flatMap(VideoStabilizationMode.init(rawValue:)) else { throw unsupported }
                s.settings.stabilization = m
            case .sceneQRCode:
                guard case .text(let text) = value else { throw unsupported }
                s.settings.items.qrCode = text
            case .sceneFace: s.settings.items.face = value.boolValue ?? false
            case .custom(let key) where ControlID.sceneItemNumberKeys.contains(key):
                guard let v = number else { throw unsupported }
                let parts = key.split(separator: ".")
                let isQR = parts[1] == "qrCode"
                var p = isQR ? s.settings.items.qr : s.settings.items.facePlacement
                switch parts[2] {
                case "x": p.x = v
                case "y": p.y = v
                case "size": p.size = v
                case "rotation": p.rotation = v
                default: p.motion = v
                }
                if isQR { s.settings.items.qr = p } else { s.settings.items.facePlacement = p }
            default:
                throw CaptureError.controlNotSupported(device: profile.uniqueID, control: control.description, detail: "not settable")
            }
            s.revision += 1
        }
    }

    // MARK: The camera model

    /// Lens position that focuses at `distance` metres: linear in dioptres, 0 = closest, 1 = infinity.
    static func focusLens(distance: Double, closest: Double) -> Double {
        min(max(1 - closest / max(distance, closest), 0), 1)
    }

    static func torchLevel(_ settings: Settings) -> Double {
        switch settings.torchMode {
        case .off: return 0
        case .on: return min(settings.torchLevel, settings.scene.maxTorchLevel)
        case .auto: return settings.scene.luminance < 0.25 ? settings.scene.maxTorchLevel : 0
        }
    }

    /// The values a client sees now.
    static func values(_ s: State, _ c: SimulatedCameraCapabilities) -> [ControlID: ControlValue] {
        Dictionary(valueList(s, c), uniquingKeysWith: { $1 })
    }

    /// The same values in a fixed order (the order depends only on the capabilities), as a frame
    /// carries them: built every frame without hashing, and compared with the last report's entry
    /// by entry (`ReportState.changes`).
    static func valueList(_ s: State, _ c: SimulatedCameraCapabilities) -> [(ControlID, ControlValue)] {
        let st = s.settings, live = s.live
        // Sized once for every control below (this runs for every frame).
        var v: [(ControlID, ControlValue)] = []
        v.reserveCapacity(64)
        if !c.focusModes.isEmpty {
            v.append((.focusMode, .menu(st.focusMode.rawValue)))
            v.append((.lensPosition, .real(st.focusMode == .locked && live.sweep == nil ? st.lensTarget : live.lens)))
            v.append((.isAdjustingFocus, .bool(live.sweep != nil)))
            v.append((.smoothAutoFocus, .bool(st.smoothAutoFocus)))
            v.append((.focusPointOfInterestX, .real(st.focusPOI.x)))
            v.append((.focusPointOfInterestY, .real(st.focusPOI.y)))
        }
        v.append((.exposureMode, .menu(st.exposureMode.rawValue)))
        v.append((.exposureDuration, .real(st.exposureMode == .custom ? st.customDuration : live.duration)))
        v.append((.iso, .real(st.exposureMode == .custom ? st.customISO : live.iso)))
        v.append((.isAdjustingExposure, .bool(live.aeAdjusting && [.autoExpose, .continuousAutoExposure].contains(st.exposureMode))))
        v.append((.exposureTargetOffset, .real(live.targetOffset)))
        v.append((.exposureTargetBias, .real(st.bias)))
        v.append((.exposurePointOfInterestX, .real(st.exposurePOI.x)))
        v.append((.exposurePointOfInterestY, .real(st.exposurePOI.y)))
        v.append((.whiteBalanceMode, .menu(st.whiteBalanceMode.rawValue)))
        let gains = st.whiteBalanceMode == .locked ? st.lockedGains : live.gains
        v.append((.whiteBalanceRedGain, .real(gains.red)))
        v.append((.whiteBalanceGreenGain, .real(gains.green)))
        v.append((.whiteBalanceBlueGain, .real(gains.blue)))
        v.append((.whiteBalanceTemperature, .real(reportedTemperature(gains))))
        v.append((.grayWorldRedGain, .real(live.grayWorld.red)))
        v.append((.grayWorldGreenGain, .real(live.grayWorld.green)))
        v.append((.grayWorldBlueGain, .real(live.grayWorld.blue)))
        v.append((.isAdjustingWhiteBalance, .bool(live.awbAdjusting && st.whiteBalanceMode != .locked)))
        v.append((.torchMode, .menu(st.torchMode.rawValue)))
        v.append((.torchLevel, .real(torchLevel(st))))
        v.append((.maxAvailableTorchLevel, .real(st.scene.maxTorchLevel)))
        v.append((.zoomFactor, .real(st.zoom)))
        v.append((.zoomRampTarget, .real(st.rampTarget)))
        v.append((.zoomRampRate, .real(st.rampRate)))
        v.append((.isRampingZoom, .bool(st.rampRate > 0)))
        v.append((.subjectAreaChangeMonitoring, .bool(st.monitoring)))
        v.append((.sceneIlluminant, .real(st.scene.illuminant)))
        v.append((.sceneSubjectDistance, .real(st.scene.subjectDistance)))
        v.append((.sceneLuminance, .real(st.scene.luminance)))
        v.append((.sceneMaxTorchLevel, .real(st.scene.maxTorchLevel)))
        v.append((.sceneShakeAmplitude, .real(st.shakeAmplitude)))
        v.append((.videoStabilizationMode, .menu(st.stabilization.rawValue)))
        v.append((.sceneQRCode, .text(st.items.qrCode)))
        v.append((.sceneFace, .bool(st.items.face)))
        for (keys, p) in zip(sceneItemPlacementControls, [st.items.qr, st.items.facePlacement]) {
            v.append((keys.x, .real(p.x)))
            v.append((keys.y, .real(p.y)))
            v.append((keys.size, .real(p.size)))
            v.append((keys.rotation, .real(p.rotation)))
            v.append((keys.motion, .real(p.motion)))
        }
        return v
    }

    /// The temperature a frame reports for `gains`, rounded: a 60-step bisection, so the last
    /// gains' answer is kept (the gains change only while white balance adjusts).
    private static func reportedTemperature(_ gains: WhiteBalanceGains) -> Double {
        if let memo = temperatureMemo.withLock({ $0 }), memo.gains == gains { return memo.kelvin }
        let kelvin = ColorScience.temperatureAndTint(for: gains).temperature.rounded()
        temperatureMemo.withLock { $0 = (gains, kelvin) }
        return kelvin
    }

    private static let temperatureMemo = Locked<(gains: WhiteBalanceGains, kelvin: Double)?>(nil)

    /// The scene items' placement controls (`scene.qrCode.x` …, `scene.face.x` …), named once.
    private static let sceneItemPlacementControls = ["qrCode", "face"].map { item in
        (x: ControlID.custom("scene.\(item).x"), y: ControlID.custom("scene.\(item).y"), size: ControlID.custom("scene.\(item).size"),
         rotation: ControlID.custom("scene.\(item).rotation"), motion: ControlID.custom("scene.\(item).motion"))
    }

    /// The control state in effect for the next frame, as camera effects.
    func beginFrame(format: DeviceFormat, frameDuration: MediaTime, width: Int, height: Int) -> FramePlan {
        let c = capabilities
        return state.withLock { s in
            s.frameSteps += 1
            return Self.plan(&s, c, format: format, frameDuration: frameDuration, width: width, height: height)
        }
    }

    /// `beginFrame` on a copy of the state: what the next frame would be made with if nothing
    /// changes first (no control set, no other frame begun or ended).
    func planAhead(format: DeviceFormat, frameDuration: MediaTime, width: Int, height: Int) -> PlannedFrame {
        var copy = state.withLock { $0 }
        let revision = copy.revision, steps = copy.frameSteps
        copy.frameSteps += 1
        let plan = Self.plan(&copy, capabilities, format: format, frameDuration: frameDuration, width: width, height: height)
        return PlannedFrame(plan: plan, after: copy, revision: revision, frameSteps: steps)
    }

    /// Begins a frame planned ahead, if the state is still the one it was planned from (then it is
    /// exactly what `beginFrame` would do now); false and nothing changed otherwise.
    func commit(_ planned: PlannedFrame) -> Bool {
        state.withLock { s in
            guard s.revision == planned.revision, s.frameSteps == planned.frameSteps else { return false }
            s = planned.after
            return true
        }
    }

    private static func plan(_ s: inout State, _ c: SimulatedCameraCapabilities, format: DeviceFormat, frameDuration: MediaTime,
                             width: Int, height: Int) -> FramePlan {
        do {
            // Zoom ramps advance by one frame's worth: rate powers of two per second.
            let maxZoom = c.hasZoom ? format.videoMaxZoomFactor : 1
            if s.settings.rampRate > 0 {
                let factor = pow(2, s.settings.rampRate * frameDuration.seconds)
                let target = min(max(s.settings.rampTarget, 1), maxZoom)
                var z = s.settings.zoom
                z = z < target ? min(z * factor, target) : max(z / factor, target)
                s.settings.zoom = z
                if z == target { s.settings.rampRate = 0 }
            }
            s.settings.zoom = min(max(s.settings.zoom, 1), maxZoom)

            // Exposure: custom values, the frozen values, or the AE controller's product split into
            // duration (up to the frame duration) first, then ISO.
            let minISO = format.minISO, maxISO = format.maxISO
            let minDuration = format.minExposureDuration.seconds, maxDuration = format.maxExposureDuration.seconds
            let aeMaxDuration = min(maxDuration, frameDuration.seconds)
            var duration: Double, iso: Double
            switch s.settings.exposureMode {
            case .custom:
                duration = min(max(s.settings.customDuration, minDuration), maxDuration)
                iso = min(max(s.settings.customISO, minISO), maxISO)
            case .locked:
                duration = min(max(s.live.duration, minDuration), maxDuration)
                iso = min(max(s.live.iso, minISO), maxISO)
            case .autoExpose, .continuousAutoExposure:
                let e = s.live.exposure
                iso = minISO
                duration = e / iso
                if duration > aeMaxDuration {
                    duration = aeMaxDuration
                    iso = min(maxISO, e / duration)
                }
                duration = max(duration, minDuration)
            }
            if let unit = c.exposureUnit { duration = max(unit, (duration / unit).rounded() * unit) }
            s.live.duration = duration
            s.live.iso = iso
            s.live.exposure = duration * iso

            // Focus: fixed-focus lenses are always sharp.
            let focus = Self.focusLens(distance: s.settings.scene.subjectDistance, closest: c.closestFocusDistance)
            var blur = 0
            if !c.focusModes.isEmpty {
                if let sweep = s.live.sweep {
                    s.live.lens = sweep.positions[sweep.index]
                } else if s.settings.focusMode == .locked {
                    s.live.lens = s.settings.lensTarget
                }
                blur = Int((abs(s.live.lens - focus) * Double(width) / 32).rounded())
            }

            // White balance: locked gains, or the AWB controller's.
            let gains = s.settings.whiteBalanceMode == .locked ? s.settings.lockedGains : s.live.gains
            s.live.gains = gains

            // Light: the scene's illuminant plus the torch, falling off with the square of the distance.
            let torch = Self.torchLevel(s.settings)
            s.live.torchLevel = torch
            let light = ColorScience.illuminant(TemperatureAndTint(temperature: s.settings.scene.illuminant))
            let torchLight = ColorScience.illuminant(TemperatureAndTint(temperature: 5000))
            let torchScale = torch * 0.6 / (s.settings.scene.subjectDistance * s.settings.scene.subjectDistance)
            let l = s.settings.scene.luminance
            let e = duration * iso
            var effects = CameraEffects()
            effects.red = (l * light.r + torchScale * torchLight.r) * e * gains.red / gains.green
            effects.green = (l * light.g + torchScale * torchLight.g) * e
            effects.blue = (l * light.b + torchScale * torchLight.b) * e * gains.blue / gains.green
            effects.blurRadius = blur
            let noise = 0.8 * (sqrt(iso / minISO) - 1)
            effects.noiseSigma = noise < 0.25 ? 0 : (noise * 8).rounded() / 8
            effects.zoom = s.settings.zoom
            effects.fullRange = format.isFullRange

            let band = FrameMarkerLayout(width: width, height: height).stampBandHeight
            func region(_ p: CapturePoint, _ half: Double) -> PixelRect {
                PixelRect(x0: max(0, Int((p.x - half) * Double(width))), y0: max(band, Int((p.y - half) * Double(height))),
                          x1: min(width, Int((p.x + half) * Double(width))), y1: min(height, Int((p.y + half) * Double(height))))
            }
            let metering = MeteringRequest(exposureRegion: region(s.settings.exposurePOI, 0.25),
                                           focusRegion: region(s.settings.focusPOI, 0.35), grayWorld: true)
            return FramePlan(revision: s.revision, effects: effects, exposureSeconds: duration, metering: metering,
                             values: Self.valueList(s, c), minISO: minISO, maxISO: maxISO, minDuration: minDuration,
                             aeMaxDuration: aeMaxDuration, width: width, shakeAmplitude: s.settings.shakeAmplitude,
                             stabilization: Self.activeStabilization(s.settings.stabilization, format), items: s.settings.items)
        }
    }

    /// The mode a frame gets (as `CaptureConnection.activeVideoStabilizationMode`): `auto` is the best
    /// mode the format has; a mode the format lacks is off.
    static func activeStabilization(_ requested: VideoStabilizationMode, _ format: DeviceFormat) -> VideoStabilizationMode {
        if requested == .auto {
            return [VideoStabilizationMode.cinematicExtended, .cinematic, .standard].first(where: format.isVideoStabilizationModeSupported) ?? .off
        }
        return format.isVideoStabilizationModeSupported(requested) ? requested : .off
    }

    /// Steps the controllers with what the frame showed, then reports the frame's values.
    func endFrame(_ plan: FramePlan, measurements m: FrameMeasurements, presentationTime: MediaTime) {
        let c = capabilities
        let subjectAreaChanged = state.withLock { s -> Bool in
            s.frameSteps += 1
            stepExposure(&s, plan, m)
            stepWhiteBalance(&s, plan, m)
            stepFocus(&s, plan, m)
            var changed = false
            if let luma = m.meanLuma {
                if s.settings.monitoring {
                    if let reference = s.live.lumaReference, abs(luma - reference) > 0.25 * max(reference, 1) { changed = true }
                    if s.live.sceneChanged { changed = true }
                    if changed || s.live.lumaReference == nil { s.live.lumaReference = luma }
                }
                s.live.sceneChanged = false
            }
            _ = c
            return changed
        }
        let (handler, changed) = reporting.withLock { r -> (ReportHandler?, [ControlID: ControlValue]) in
            guard let handler = r.handler else { return (nil, [:]) }
            defer { r.reported = plan.values }
            return (handler, r.changes(to: plan.values))
        }
        handler?.call(ControlReport(presentationTime: presentationTime, revision: plan.revision, values: changed,
                                    subjectAreaChanged: subjectAreaChanged))
    }
}
