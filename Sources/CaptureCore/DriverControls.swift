/// Device controls as data (the libcamera idea): each driver lists the controls it has with their
/// ranges, and the device facade maps AVFoundation's properties onto them. A control a driver
/// does not list is unsupported, and the matching `is…Supported` query answers false.
public enum ControlID: Hashable, Sendable, CustomStringConvertible {
    case exposureMode            // menu: locked, autoExpose, continuousAutoExposure, custom
    case exposureDuration        // seconds
    case iso                     // ISO number
    case exposureTargetBias      // EV
    case focusMode               // menu: locked, autoFocus, continuousAutoFocus
    case lensPosition            // 0…1 as AVFoundation: 0 is the closest focus, 1 the farthest
    case whiteBalanceMode        // menu: locked, autoWhiteBalance, continuousAutoWhiteBalance
    case whiteBalanceTemperature // kelvin
    case torchMode               // menu: off, on, auto
    case torchLevel              // 0…1
    case zoomFactor              // 1…max
    case brightness, contrast, saturation, hue, gain
    /// A driver-specific control (e.g. a V4L2 control with no AVFoundation counterpart, or a
    /// simulator scene parameter such as `scene.illuminant`).
    case custom(String)

    public var description: String {
        switch self {
        case .exposureMode: return "exposure.mode"
        case .exposureDuration: return "exposure.duration"
        case .iso: return "exposure.iso"
        case .exposureTargetBias: return "exposure.bias"
        case .focusMode: return "focus.mode"
        case .lensPosition: return "focus.lensPosition"
        case .whiteBalanceMode: return "whiteBalance.mode"
        case .whiteBalanceTemperature: return "whiteBalance.temperature"
        case .torchMode: return "torch.mode"
        case .torchLevel: return "torch.level"
        case .zoomFactor: return "zoom.factor"
        case .brightness: return "brightness"
        case .contrast: return "contrast"
        case .saturation: return "saturation"
        case .hue: return "hue"
        case .gain: return "gain"
        case .custom(let name): return name
        }
    }
}

/// A control's value.
public enum ControlValue: Hashable, Sendable, CustomStringConvertible {
    case bool(Bool)
    case integer(Int64)
    case real(Double)
    /// One of the control's menu entries, by name.
    case menu(String)
    /// Free text (the simulator's `scene.qrCode` content).
    case text(String)

    public var description: String {
        switch self {
        case .bool(let b): return String(b)
        case .integer(let i): return String(i)
        case .real(let d): return String(d)
        case .menu(let m): return m
        case .text(let t): return t
        }
    }
}

/// What a driver says about one control: its kind, range and default.
public struct ControlDescription: Hashable, Sendable {
    public enum Kind: Hashable, Sendable {
        case bool
        case integer(min: Int64, max: Int64, step: Int64)
        case real(min: Double, max: Double)
        case menu([String])
        /// Any text (possibly empty).
        case text
    }

    public var id: ControlID
    public var kind: Kind
    public var defaultValue: ControlValue
    /// True when the value may change by itself (auto modes), so it should be observed, not cached.
    public var isVolatile: Bool
    /// True for status values a client can read but not set (e.g. `focus.isAdjusting`).
    public var isReadOnly: Bool

    public init(id: ControlID, kind: Kind, defaultValue: ControlValue, isVolatile: Bool = false, isReadOnly: Bool = false) {
        self.id = id
        self.kind = kind
        self.defaultValue = defaultValue
        self.isVolatile = isVolatile
        self.isReadOnly = isReadOnly
    }
}

/// Controls and the configuration lock at the driver level. Defaults: no controls, and a lock
/// that only this process knows about (the device facade enforces it across sessions).
extension DriverDevice {
    public var controls: [ControlDescription] { [] }

    public func value(of control: ControlID) throws(CaptureError) -> ControlValue {
        throw .invalidArgument("\(description.uniqueID) has no control \(control)")
    }

    public func setValue(_ value: ControlValue, for control: ControlID) throws(CaptureError) {
        throw .invalidArgument("\(description.uniqueID) has no control \(control)")
    }

    /// Takes the device's configuration priority (V4L2: VIDIOC_S_PRIORITY RECORD); throws when
    /// another client holds it.
    public func acquireConfigurationPriority() throws(CaptureError) {}

    public func releaseConfigurationPriority() {}
}
