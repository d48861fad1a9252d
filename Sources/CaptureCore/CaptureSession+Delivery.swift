import Foundation

extension CaptureSession {
    // MARK: Delivery

    /// Delivers one sample to every enabled connection of its input.
    func deliver(_ sample: SampleBuffer, from input: CaptureDeviceInput) {
        let targets = state.withLock { s in s.connections.filter { $0.input === input && $0.isEnabled } }
        for connection in targets {
            if let gap = sample.discontinuity { connection.output.didDrop(gap, before: sample, from: connection) }
            connection.output.receive(sample, from: connection)
        }
    }

    /// A stream failed (e.g. its device was unplugged): as AVFoundation, the session posts the
    /// runtime error and stops, so outputs finish (a recording finalizes a playable file).
    func streamFailed(_ entry: StreamEntry, _ error: CaptureError, generation: Int) {
        stop(entry)
        if case .deviceDisconnected = error { entry.input.device.markDisconnected() }
        events.send(.runtimeError(error))
        // Off the delivery thread (stopping waits for the pumps, this one included), and only this
        // run: a new start in the meantime keeps running.
        DispatchQueue.global().async { self.stop(generation: generation) }
    }

    /// A stream reported its end (a replayed fixture ran out): once every stream has ended the
    /// session stops, so outputs finish (a recording finalizes its file).
    func streamEnded(_ entry: StreamEntry, generation: Int) {
        stop(entry)
        events.send(.streamEnded(deviceID: entry.input.device.uniqueID))
        if state.withLock({ $0.streams.isEmpty }) {
            DispatchQueue.global().async { self.stop(generation: generation) }
        }
    }
}
