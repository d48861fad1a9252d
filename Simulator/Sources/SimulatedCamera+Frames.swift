import CaptureCore
import Foundation

extension SimulatedCamera {
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

    static func plan(_ s: inout State, _ c: SimulatedCameraCapabilities, format: DeviceFormat, frameDuration: MediaTime,
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
