import CaptureCore
import Foundation

extension SimulatedCamera {
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
}
