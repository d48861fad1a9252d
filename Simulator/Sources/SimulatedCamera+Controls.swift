import CaptureCore
import Foundation

extension SimulatedCamera {
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
}
