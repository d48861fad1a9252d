import Foundation

extension CaptureSession {
    // MARK: Manual stepping

    /// Turns on manual stepping, in the spirit of SwiftNIO's `EmbeddedEventLoop`: a running
    /// virtual-pace session then delivers nothing by itself; `advance(by:)` and `advance(toFrame:)`
    /// move its clock and return once everything due has been delivered to the outputs. Tests and
    /// scenario harnesses use it to say exactly how much capture happens, with no sleeps and no
    /// timing. Virtual pace only; call it before `startRunning`.
    public func enableManualStepping() throws(CaptureError) {
        try state.withLock { (s: inout State) throws(CaptureError) in
            guard pump.supportsManualStepping else {
                throw .unsupportedPace("manual stepping needs a virtual-pace session; a real-time one follows the devices' clocks")
            }
            guard !s.wantsRunning else { throw .invalidState("enableManualStepping() while running; call it before startRunning()") }
            s.stepping = Stepping()
        }
    }

    /// Delivers every sample with a PTS before the current step's end plus `duration`, in PTS order
    /// (video first on ties), and returns once they have been handed to the outputs (outputs that
    /// are busy are waited for, as the virtual pump always does). The first step starts at the
    /// session's start: `advance(by: 1 s)` at 30 fps delivers frames 0…29 and the audio before 1 s.
    public func advance(by duration: MediaTime) throws(CaptureError) {
        guard duration.isNumeric, duration >= .zero else { throw .invalidArgument("advance(by:) takes a duration of zero or more, not \(duration)") }
        try step { $0.limit = $0.limit + duration; $0.frameTarget = nil }
    }

    /// Delivers until `count` video frames have been delivered since `startRunning` (and the audio
    /// before the next frame), then returns.
    public func advance(toFrame count: Int) throws(CaptureError) {
        guard count >= 0 else { throw .invalidArgument("advance(toFrame:) takes a frame count of zero or more, not \(count)") }
        try step { $0.frameTarget = count }
    }

    func step(_ change: (inout Stepping) -> Void) throws(CaptureError) {
        guard !PumpThread.isDelivering(for: self) else {
            throw .invalidState("advance on the session's own delivery thread (inside an output's receive) would wait for itself")
        }
        let mine = try state.withLock { (s: inout State) throws(CaptureError) -> Int in
            guard var stepping = s.stepping else {
                throw .invalidState("advance needs manual stepping: call enableManualStepping() before startRunning()")
            }
            guard s.wantsRunning else { throw .sessionNotRunning }
            change(&stepping)
            stepping.requested += 1
            s.stepping = stepping
            return stepping.requested
        }
        wake.signal()
        wake.wait(while: { self.state.withLock { s in s.wantsRunning && s.interruption == nil && (s.stepping?.parkedAt ?? .max) < mine } })
    }
}
