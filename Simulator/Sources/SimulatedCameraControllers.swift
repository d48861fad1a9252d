import CaptureCore
import Foundation

/// The simulated camera's three auto controllers, stepped once per frame from that frame's
/// statistics (`SimulatedCamera.endFrame`): auto exposure toward 18 % grey × 2^bias, gray-world auto
/// white balance, contrast autofocus (coarse then fine sweep, continuous re-hunt). They read only the
/// frame's plan and measurements, never a clock, so the same frames give the same steps.
extension SimulatedCamera {
    func stepExposure(_ s: inout State, _ plan: FramePlan, _ m: FrameMeasurements) {
        guard let luma = m.meanLuma else { return }
        let target = 0.18 * pow(2, s.settings.bias)
        let measured = max(SyntheticFrameRenderer.linearLight(ofLuma: luma), 1e-4)
        let ev = log2(target / measured)
        s.live.targetOffset = -ev
        guard [.autoExpose, .continuousAutoExposure].contains(s.settings.exposureMode) else { return }
        if !s.live.aeAdjusting && abs(ev) > 0.15 { s.live.aeAdjusting = true }
        guard s.live.aeAdjusting else { return }
        if abs(ev) < 0.05 {
            s.live.aeAdjusting = false
            if s.settings.exposureMode == .autoExpose { s.settings.exposureMode = .locked }
            return
        }
        let lo = plan.minDuration * plan.minISO, hi = plan.aeMaxDuration * plan.maxISO
        let next = min(max(s.live.exposure * pow(2, 0.6 * ev), lo), hi)
        if next == s.live.exposure {
            // At a limit: nothing more to do.
            s.live.aeAdjusting = false
            if s.settings.exposureMode == .autoExpose { s.settings.exposureMode = .locked }
        }
        s.live.exposure = next
    }

    func stepWhiteBalance(_ s: inout State, _ plan: FramePlan, _ m: FrameMeasurements) {
        guard let means = m.linearMeans else { return }
        // Undo the gains this frame had to see the raw colour of the light.
        let g = s.live.gains
        let raw = (r: means.r * g.green / g.red, g: means.g, b: means.b * g.green / g.blue)
        guard raw.r > 1e-5, raw.g > 1e-5, raw.b > 1e-5 else { return }
        let maxGain = capabilities.maxWhiteBalanceGain
        let world = WhiteBalanceGains(red: raw.g / raw.r, green: 1, blue: raw.g / raw.b).normalized
        s.live.grayWorld = WhiteBalanceGains(red: min(world.red, maxGain), green: min(world.green, maxGain), blue: min(world.blue, maxGain))
        guard [.autoWhiteBalance, .continuousAutoWhiteBalance].contains(s.settings.whiteBalanceMode) else { return }
        let target = s.live.grayWorld
        let error = max(abs(log(target.red / g.red)), abs(log(target.green / g.green)), abs(log(target.blue / g.blue)))
        // Hysteresis: the moving box alone shifts the gray world by a few percent.
        if !s.live.awbAdjusting && error > 0.1 { s.live.awbAdjusting = true }
        guard s.live.awbAdjusting else { return }
        if error < 0.01 {
            s.live.awbAdjusting = false
            if s.settings.whiteBalanceMode == .autoWhiteBalance {
                s.settings.whiteBalanceMode = .locked
                s.settings.lockedGains = g
            }
            return
        }
        func step(_ current: Double, _ goal: Double) -> Double { min(max(current * pow(goal / current, 0.5), 1), maxGain) }
        s.live.gains = WhiteBalanceGains(red: step(g.red, target.red), green: step(g.green, target.green), blue: step(g.blue, target.blue)).normalized
    }

    /// Contrast-detection autofocus: a coarse sweep over the lens range, a fine sweep around the
    /// best position, then settle there; continuous mode re-hunts when sharpness drops for a few
    /// frames or the subject moves.
    func stepFocus(_ s: inout State, _ plan: FramePlan, _ m: FrameMeasurements) {
        guard !capabilities.focusModes.isEmpty, s.settings.focusMode != .locked, let score = m.contrast else {
            s.live.afRestart = false
            return
        }
        let coarseStep = s.settings.smoothAutoFocus ? 0.05 : 0.1
        if s.live.afRestart {
            s.live.afRestart = false
            s.live.sweep = AFSweep(positions: Array(stride(from: 0.0, through: 1.0 + 1e-9, by: coarseStep)))
            return
        }
        if var sweep = s.live.sweep {
            if score > sweep.bestScore {
                sweep.bestScore = score
                sweep.best = sweep.positions[sweep.index]
            }
            sweep.index += 1
            if sweep.index < sweep.positions.count {
                s.live.sweep = sweep
                return
            }
            if !sweep.fine {
                let fineStep = coarseStep / 4
                let positions = stride(from: sweep.best - coarseStep, through: sweep.best + coarseStep + 1e-9, by: fineStep)
                    .map { min(max($0, 0), 1) }
                s.live.sweep = AFSweep(positions: positions, best: sweep.best, bestScore: -1, fine: true)
                return
            }
            s.live.sweep = nil
            s.live.lens = sweep.best
            s.live.afReference = sweep.bestScore
            s.live.afLowFrames = 0
            if s.settings.focusMode == .autoFocus {
                s.settings.focusMode = .locked
                s.settings.lensTarget = sweep.best
            }
            return
        }
        guard s.settings.focusMode == .continuousAutoFocus else { return }
        guard let reference = s.live.afReference else {
            s.live.afReference = score
            return
        }
        if score < 0.6 * reference {
            s.live.afLowFrames += 1
            if s.live.afLowFrames >= 3 {
                s.live.afLowFrames = 0
                s.live.sweep = AFSweep(positions: Array(stride(from: 0.0, through: 1.0 + 1e-9, by: coarseStep)))
            }
        } else {
            s.live.afLowFrames = 0
        }
    }
}
