import Foundation

/// One control as the command line shows it: whether the device supports it, what it allows, and
/// its current value.
public struct ControlStatus: Sendable, Codable, Hashable {
    public var key: String
    public var supported: Bool
    public var allowed: String
    public var current: String?
    public var needsLock: Bool
}

/// Controls by text key (`focus.mode=continuousAutoFocus`, `exposure.duration=1/120`…), for the
/// command line and configuration files. Every key maps onto the typed facade, so the same
/// validation and errors apply.
extension CaptureDevice {
    public static let controlKeys = [
        "focus.mode", "focus.lensPosition", "exposure.mode", "exposure.duration", "exposure.iso", "exposure.bias",
        "whiteBalance.mode", "whiteBalance.temperature", "torch.mode", "torch.level", "zoom.factor",
        "scene.illuminant", "scene.subjectDistance", "scene.luminance", "scene.maxTorchLevel", "scene.shakeAmplitude",
    ] + sceneItemKeys

    /// The simulator's scene items (a QR code, a face): `scene.qrCode` is text (empty: none),
    /// `scene.face` on/off, the rest numbers (see `ControlID.sceneItemNumberKeys`).
    public static let sceneItemKeys = ["scene.qrCode", "scene.face"] + ControlID.sceneItemNumberKeys

    private static func n(_ v: Double) -> String { String(format: "%g", v) }

    /// Every key with its support, allowed values and current value.
    public func controlStatuses() -> [ControlStatus] {
        let format = activeFormat
        func status(_ key: String, _ supported: Bool, _ allowed: String, _ current: String?, lock: Bool = true) -> ControlStatus {
            ControlStatus(key: key, supported: supported, allowed: supported ? allowed : "unsupported",
                          current: supported ? current : nil, needsLock: lock)
        }
        func names<M: RawRepresentable>(_ all: [M], _ test: (M) -> Bool) -> String where M.RawValue == String {
            all.filter(test).map(\.rawValue).joined(separator: ", ")
        }
        let isVideo = mediaType == .video
        let hasTemperature = isLockingWhiteBalanceWithCustomDeviceGainsSupported || controlDescription(.whiteBalanceTemperature) != nil
        var temperatureRange = "1000…40000 K (gains within 1…\(Self.n(maxWhiteBalanceGain)))"
        if case .real(let lo, let hi)? = controlDescription(.whiteBalanceTemperature)?.kind, !isLockingWhiteBalanceWithCustomDeviceGainsSupported {
            temperatureRange = "\(Self.n(lo))…\(Self.n(hi)) K"
        }
        var list = [
            status("focus.mode", isVideo, names(FocusMode.allCases, isFocusModeSupported), focusMode.rawValue),
            status("focus.lensPosition", isLockingFocusWithCustomLensPositionSupported, "0…1 (0 closest, 1 infinity)", Self.n(lensPosition)),
            status("exposure.mode", controlDescription(.exposureMode) != nil, names(ExposureMode.allCases, isExposureModeSupported), exposureMode.rawValue),
            status("exposure.duration", isExposureModeSupported(.custom),
                   "\(Self.n(format.minExposureDuration.seconds))…\(Self.n(format.maxExposureDuration.seconds)) s (seconds or a fraction like 1/120)",
                   Self.n(exposureDuration.seconds)),
            status("exposure.iso", isExposureModeSupported(.custom), "\(Self.n(format.minISO))…\(Self.n(format.maxISO))", Self.n(iso)),
            status("exposure.bias", controlDescription(.exposureTargetBias) != nil,
                   "\(Self.n(minExposureTargetBias))…\(Self.n(maxExposureTargetBias)) EV", Self.n(exposureTargetBias)),
            status("whiteBalance.mode", controlDescription(.whiteBalanceMode) != nil,
                   names(WhiteBalanceMode.allCases, isWhiteBalanceModeSupported), whiteBalanceMode.rawValue),
            status("whiteBalance.temperature", hasTemperature, temperatureRange,
                   Self.n(temperatureAndTintValues(for: deviceWhiteBalanceGains).temperature.rounded())),
            status("torch.mode", hasTorch, names(TorchMode.allCases, isTorchModeSupported), torchMode.rawValue),
            status("torch.level", hasTorch, "greater than 0, at most \(Self.n(maxAvailableTorchLevel)) now (1 when cool)", Self.n(torchLevel)),
            status("zoom.factor", controlDescription(.zoomFactor) != nil, "1…\(Self.n(format.videoMaxZoomFactor))", Self.n(videoZoomFactor)),
        ]
        for key in ["scene.illuminant", "scene.subjectDistance", "scene.luminance", "scene.maxTorchLevel", "scene.shakeAmplitude"] {
            let id = ControlID.custom(key)
            if case .real(let lo, let hi)? = controlDescription(id)?.kind {
                list.append(status(key, true, "\(Self.n(lo))…\(Self.n(hi))", (try? value(of: id).doubleValue).map { Self.n($0) }, lock: false))
            } else {
                list.append(status(key, false, "", nil, lock: false))
            }
        }
        for key in Self.sceneItemKeys {
            let id = ControlID.custom(key)
            let description = controlDescription(id)
            let current = try? value(of: id)
            switch description?.kind {
            case .text?: list.append(status(key, true, "any text (empty: no code)", current?.description, lock: false))
            case .bool?: list.append(status(key, true, "on, off", current?.boolValue.map { $0 ? "on" : "off" }, lock: false))
            case .real(let lo, let hi)?:
                list.append(status(key, true, "\(Self.n(lo))…\(Self.n(hi))", current?.doubleValue.map { Self.n($0) }, lock: false))
            default: list.append(status(key, false, "", nil, lock: false))
            }
        }
        return list
    }

    /// Applies `key=value` (see `controlKeys`). Device controls need the configuration lock; scene
    /// parameters do not. Errors name the key, the value and what is allowed.
    public func applyControl(key: String, value text: String) throws(CaptureError) {
        let allowed = controlStatuses().first { $0.key == key }?.allowed ?? ""
        func bad() -> CaptureError { .valueOutOfRange(control: key, value: text, allowed: allowed) }
        func number() throws(CaptureError) -> Double {
            guard let v = Self.parseNumber(text) else { throw bad() }
            return v
        }
        func mode<M: RawRepresentable>(_: M.Type) throws(CaptureError) -> M where M.RawValue == String {
            guard let m = M(rawValue: text) else { throw bad() }
            return m
        }
        switch key {
        case "focus.mode": try setFocusMode(try mode(FocusMode.self))
        case "focus.lensPosition": try setFocusModeLocked(lensPosition: try number())
        case "exposure.mode": try setExposureMode(try mode(ExposureMode.self))
        case "exposure.duration":
            let seconds = try number()
            guard seconds > 0 else { throw bad() }
            try setExposureModeCustom(duration: MediaTime(seconds: seconds, preferredTimescale: 1_000_000_000), iso: Self.currentISO)
        case "exposure.iso": try setExposureModeCustom(duration: Self.currentExposureDuration, iso: try number())
        case "exposure.bias": try setExposureTargetBias(try number())
        case "whiteBalance.mode": try setWhiteBalanceMode(try mode(WhiteBalanceMode.self))
        case "whiteBalance.temperature": try setWhiteBalanceModeLocked(temperatureAndTint: TemperatureAndTint(temperature: try number()))
        case "torch.mode": try setTorchMode(try mode(TorchMode.self))
        case "torch.level": try setTorchModeOn(level: try number())
        case "zoom.factor": try setVideoZoomFactor(try number())
        case "scene.illuminant", "scene.subjectDistance", "scene.luminance", "scene.maxTorchLevel", "scene.shakeAmplitude":
            try setValue(.real(try number()), for: .custom(key))
        case "scene.qrCode":
            guard controlDescription(.custom(key)) != nil else {
                throw .controlNotSupported(device: uniqueID, control: key, detail: "only simulated cameras have scene items")
            }
            try setValue(.text(text), for: .custom(key))
        case "scene.face":
            guard let on = ["on": true, "true": true, "1": true, "off": false, "false": false, "0": false][text.lowercased()] else { throw bad() }
            try setValue(.bool(on), for: .custom(key))
        case let key where ControlID.sceneItemNumberKeys.contains(key):
            try setValue(.real(try number()), for: .custom(key))
        default:
            throw .unknownControl(key: key, known: Self.controlKeys.joined(separator: ", "))
        }
    }

    /// A decimal number or a fraction such as `1/120`.
    public static func parseNumber(_ text: String) -> Double? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        if parts.count == 2, let a = Double(parts[0]), let b = Double(parts[1]), b != 0 { return (a / b).isFinite ? a / b : nil }
        guard parts.count == 1, let v = Double(text), v.isFinite else { return nil }
        return v
    }
}
