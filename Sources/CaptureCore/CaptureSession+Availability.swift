import Foundation

extension CaptureSession {
    func unavailableReason() -> InterruptionReason? {
        inputs.lazy.compactMap { DeviceAvailability.shared.reason(for: $0.device) }.first
    }

    func observeAvailability() {
        availabilityToken.withLock { token in
            guard token == nil else { return }
            token = DeviceAvailability.shared.addObserver { [weak self] change in self?.availabilityChanged(change) }
        }
    }

    /// Interrupts when one of our devices becomes unavailable; resumes when all are back, unless stopped.
    private func availabilityChanged(_ change: DeviceAvailability.Change) {
        transitions.lock()
        defer { transitions.unlock() }
        let mine = inputs.map(\.device)
        switch change {
        case .unavailable(let device, let reason):
            guard mine.contains(where: { $0 === device }) else { return }
            let interrupt = state.withLock { s -> Bool in
                guard s.wantsRunning, s.interruption == nil else { return false }
                s.interruption = reason
                return true
            }
            guard interrupt else { return }
            stopStreams()
            wake.signal()
            // Delivery has ended when the interruption is reported (as after a stop).
            if !PumpThread.isDelivering(for: self) { state.withLock { $0.pumps }.wait() }
            for output in outputs {
                output.attachment.setRunning(false)
                output.sessionDidStop()
            }
            events.send(.interrupted(reason))
        case .available(let device):
            guard mine.contains(where: { $0 === device }), unavailableReason() == nil else { return }
            let resume = state.withLock { s -> Bool in
                guard s.wantsRunning, s.interruption != nil else { return false }
                s.interruption = nil
                s.generation += 1
                s.hostAnchor = HostClock.now()
                return true
            }
            guard resume else { return }
            do {
                try syncStreams(anchor: state.withLock { $0.hostAnchor })
            } catch {
                events.send(.runtimeError(error))
                return
            }
            for output in outputs { output.attachment.setRunning(true) }
            pump.runStarted(pumpContext)
            events.send(.interruptionEnded)
        }
    }
}
