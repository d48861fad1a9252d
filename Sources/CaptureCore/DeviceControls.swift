import Foundation

// The vocabulary shared by the device facade (`CaptureDevice`) and the drivers: mode names,
// the custom control IDs that carry AVFoundation properties without a generic counterpart,
// per-frame control reports, and the colour science behind white-balance conversions.

/// Focus modes (AVCaptureDevice.FocusMode). Raw values are the `focus.mode` menu entries.
public enum FocusMode: String, Sendable, Hashable, Codable, CaseIterable {
    case locked, autoFocus, continuousAutoFocus
}

/// Exposure modes (AVCaptureDevice.ExposureMode). Raw values are the `exposure.mode` menu entries.
public enum ExposureMode: String, Sendable, Hashable, Codable, CaseIterable {
    case locked, autoExpose, continuousAutoExposure, custom
}

/// White balance modes (AVCaptureDevice.WhiteBalanceMode). Raw values are the `whiteBalance.mode` menu entries.
public enum WhiteBalanceMode: String, Sendable, Hashable, Codable, CaseIterable {
    case locked, autoWhiteBalance, continuousAutoWhiteBalance
}

/// Torch modes (AVCaptureDevice.TorchMode). Raw values are the `torch.mode` menu entries.
public enum TorchMode: String, Sendable, Hashable, Codable, CaseIterable {
    case off, on, auto
}

/// A point in normalized image coordinates: (0, 0) top-left, (1, 1) bottom-right of the landscape image.
public struct CapturePoint: Sendable, Hashable, CustomStringConvertible {
    public var x: Double
    public var y: Double
    public init(x: Double, y: Double) { self.x = x; self.y = y }
    public static let center = CapturePoint(x: 0.5, y: 0.5)
    public var description: String { "(\(x), \(y))" }
}

/// Per-channel white-balance gains applied to the sensor's raw values (each 1…maxWhiteBalanceGain).
public struct WhiteBalanceGains: Sendable, Hashable, CustomStringConvertible {
    public var red: Double
    public var green: Double
    public var blue: Double
    public init(red: Double, green: Double, blue: Double) { self.red = red; self.green = green; self.blue = blue }

    /// The "keep the current gains" sentinel (AVCaptureWhiteBalanceGainsCurrent).
    public static let current = WhiteBalanceGains(red: 0, green: 0, blue: 0)
    public static let unity = WhiteBalanceGains(red: 1, green: 1, blue: 1)

    /// Scaled so the smallest gain is 1, as devices report them.
    public var normalized: WhiteBalanceGains {
        let m = min(red, green, blue)
        guard m > 0 else { return self }
        return WhiteBalanceGains(red: red / m, green: green / m, blue: blue / m)
    }

    public var description: String { String(format: "(r %.3f, g %.3f, b %.3f)", red, green, blue) }
}

/// A colour temperature in kelvin and a green–magenta tint (positive = greener light).
public struct TemperatureAndTint: Sendable, Hashable, CustomStringConvertible {
    public var temperature: Double
    public var tint: Double
    public init(temperature: Double, tint: Double = 0) { self.temperature = temperature; self.tint = tint }
    public var description: String { String(format: "%.0f K, tint %.1f", temperature, tint) }
}

/// A control value in effect from a given frame on.
public struct TimedControlValue: Sendable, Hashable {
    public var control: ControlID
    public var value: ControlValue
    /// PTS of the first frame with this value.
    public var presentationTime: MediaTime
    public init(control: ControlID, value: ControlValue, presentationTime: MediaTime) {
        self.control = control
        self.value = value
        self.presentationTime = presentationTime
    }
}

/// What a streaming device reports once per frame: the control values in effect for that frame
/// that changed since its previous report (with the frame's PTS and control revision).
public struct ControlReport: Sendable {
    public var presentationTime: MediaTime
    /// The driver's control revision the frame was made with (see `ControlReportingDevice`).
    public var revision: UInt64
    /// The control values this frame was made with that differ from the previous report's to the
    /// same handler (all of them in a handler's first report): the device keeps the rest.
    public var values: [ControlID: ControlValue]
    /// True when the scene in the subject area changed noticeably (and monitoring is on).
    public var subjectAreaChanged: Bool

    public init(presentationTime: MediaTime, revision: UInt64, values: [ControlID: ControlValue], subjectAreaChanged: Bool = false) {
        self.presentationTime = presentationTime
        self.revision = revision
        self.values = values
        self.subjectAreaChanged = subjectAreaChanged
    }
}

/// A driver device that reports, per frame, which control values took effect (so completion
/// handlers get the PTS of the first frame with a setting, and self-changing values are observable).
///
/// Every successful `setValue` advances `controlRevision`; a frame made after that change reports
/// a revision at least as large. Drivers that cannot tell (plain V4L2) simply do not adopt this;
/// the facade then completes handlers with an invalid time.
public protocol ControlReportingDevice: DriverDevice {
    var controlRevision: UInt64 { get }
    /// Installs (or with nil removes) the per-frame report handler; called on the streaming thread.
    func setControlReportHandler(_ handler: (@Sendable (ControlReport) -> Void)?)
}

extension ControlID {
    // Properties without a generic control of their own, as driver-specific controls.
    public static let focusPointOfInterestX = ControlID.custom("focus.pointOfInterest.x")
    public static let focusPointOfInterestY = ControlID.custom("focus.pointOfInterest.y")
    public static let exposurePointOfInterestX = ControlID.custom("exposure.pointOfInterest.x")
    public static let exposurePointOfInterestY = ControlID.custom("exposure.pointOfInterest.y")
    public static let smoothAutoFocus = ControlID.custom("focus.smooth")
    public static let isAdjustingFocus = ControlID.custom("focus.isAdjusting")
    public static let isAdjustingExposure = ControlID.custom("exposure.isAdjusting")
    public static let isAdjustingWhiteBalance = ControlID.custom("whiteBalance.isAdjusting")
    public static let exposureTargetOffset = ControlID.custom("exposure.targetOffset")
    public static let whiteBalanceRedGain = ControlID.custom("whiteBalance.gains.red")
    public static let whiteBalanceGreenGain = ControlID.custom("whiteBalance.gains.green")
    public static let whiteBalanceBlueGain = ControlID.custom("whiteBalance.gains.blue")
    public static let grayWorldRedGain = ControlID.custom("whiteBalance.grayWorld.red")
    public static let grayWorldGreenGain = ControlID.custom("whiteBalance.grayWorld.green")
    public static let grayWorldBlueGain = ControlID.custom("whiteBalance.grayWorld.blue")
    public static let maxAvailableTorchLevel = ControlID.custom("torch.maxAvailableLevel")
    public static let zoomRampTarget = ControlID.custom("zoom.rampTarget")
    /// Powers of two per second; 0 cancels a ramp.
    public static let zoomRampRate = ControlID.custom("zoom.rampRate")
    public static let isRampingZoom = ControlID.custom("zoom.isRamping")
    public static let subjectAreaChangeMonitoring = ControlID.custom("subjectArea.monitoring")
    // The simulator's scene (not device configuration: settable without the lock).
    public static let sceneIlluminant = ControlID.custom("scene.illuminant")
    public static let sceneSubjectDistance = ControlID.custom("scene.subjectDistance")
    public static let sceneLuminance = ControlID.custom("scene.luminance")
    /// The simulated thermal state: the highest torch level available now.
    public static let sceneMaxTorchLevel = ControlID.custom("scene.maxTorchLevel")

    /// Observation only (`CaptureDevice.observe`): the stream's format, as `420v 1280x720`, and its
    /// frame duration in seconds, each with the PTS of the first frame delivered with it after a
    /// change made while the device streams (live reconfiguration).
    public static let activeFormat = ControlID.custom("stream.format")
    public static let activeFrameDuration = ControlID.custom("stream.frameDuration")

    /// The simulated hand shake: amplitude in pixels (0 = a steady camera; see `CameraShake`).
    public static let sceneShakeAmplitude = ControlID.custom("scene.shakeAmplitude")
    /// The stabilization a device applies to its stream (menu of `VideoStabilizationMode` raw
    /// values). Set by the session from its connections' active modes, not by apps.
    public static let videoStabilizationMode = ControlID.custom("stabilization.mode")

    // The simulator's scene items (a QR code and a face photograph, each optionally moving).
    public static let sceneQRCode = ControlID.custom("scene.qrCode")
    public static let sceneFace = ControlID.custom("scene.face")
    /// Centre (0…1 of the frame), size (fraction of the frame height), rotation (degrees,
    /// clockwise) and motion (frame widths per second along a horizontal back-and-forth path) of
    /// each item.
    public static let sceneItemNumberKeys = ["qrCode", "face"].flatMap { item in
        ["x", "y", "size", "rotation", "motion"].map { "scene.\(item).\($0)" }
    }

    /// Scene parameters describe the world, not the device, so they need no configuration lock.
    public var isSceneParameter: Bool { description.hasPrefix("scene.") }
}

extension ControlValue {
    public var doubleValue: Double? {
        switch self {
        case .real(let d): return d
        case .integer(let i): return Double(i)
        case .bool(let b): return b ? 1 : 0
        case .menu, .text: return nil
        }
    }

    public var boolValue: Bool? {
        switch self {
        case .bool(let b): return b
        case .integer(let i): return i != 0
        case .real(let d): return d != 0
        case .menu, .text: return nil
        }
    }

    public var menuValue: String? {
        if case .menu(let m) = self { return m }
        return nil
    }
}

/// Colour science for white balance: illuminants from Planck's law sampled at three wavelengths
/// (R 610 nm, G 550 nm, B 465 nm), normalized so 6500 K is neutral (1, 1, 1).
public enum ColorScience {
    static func planck(_ nanometres: Double, _ kelvin: Double) -> Double {
        let l = nanometres * 1e-9
        return 1 / (pow(l, 5) * (exp(0.014_388 / (l * kelvin)) - 1))
    }

    /// Relative RGB of light at a colour temperature (green = 1 at tint 0; 6500 K = (1, 1, 1)).
    public static func illuminant(_ tt: TemperatureAndTint) -> (r: Double, g: Double, b: Double) {
        let t = min(max(tt.temperature, 1000), 40_000)
        let r = planck(610, t) / planck(550, t) / (planck(610, 6500) / planck(550, 6500))
        let b = planck(465, t) / planck(550, t) / (planck(465, 6500) / planck(550, 6500))
        return (r, max(0.05, 1 + tt.tint / 1000), b)
    }

    /// Gains that neutralize light of this temperature and tint (AVCaptureDevice.deviceWhiteBalanceGains(for:)).
    public static func gains(for tt: TemperatureAndTint) -> WhiteBalanceGains {
        let i = illuminant(tt)
        return WhiteBalanceGains(red: 1 / i.r, green: 1 / i.g, blue: 1 / i.b).normalized
    }

    /// The temperature and tint whose neutralizing gains these are (the inverse of `gains(for:)`).
    public static func temperatureAndTint(for gains: WhiteBalanceGains) -> TemperatureAndTint {
        guard gains.red > 0, gains.green > 0, gains.blue > 0 else { return TemperatureAndTint(temperature: 6500) }
        // Light ∝ 1 / gains; its R/B ratio falls monotonically with temperature: bisect.
        let target = (1 / gains.red) / (1 / gains.blue)
        var lo = 1000.0, hi = 40_000.0
        for _ in 0..<60 {
            let mid = (lo + hi) / 2
            let i = illuminant(TemperatureAndTint(temperature: mid))
            if i.r / i.b > target { lo = mid } else { hi = mid }
        }
        let t = (lo + hi) / 2
        let i = illuminant(TemperatureAndTint(temperature: t))
        let k = (1 / gains.red) / i.r
        let green = (1 / gains.green) / k
        return TemperatureAndTint(temperature: t, tint: (green - 1) * 1000)
    }
}
