/// Real time: one thread per stream, delivering each sample as its device produces it. Ignores
/// output demand (outputs drop instead) and cannot be stepped.
struct RealtimePump: SessionPump {
    var supportsManualStepping: Bool { false }

    func streamAnchor(virtualNow: MediaTime, requested: MediaTime?) -> MediaTime {
        requested ?? HostClock.now()
    }

    /// Nothing to do: each stream's thread started with the stream.
    func runStarted(_ context: PumpContext) {}

    func streamStarted(_ entry: CaptureSession.StreamEntry, _ context: PumpContext) {
        let generation = context.generation()
        context.spawn("CaptureKit.pump.\(entry.input.device.uniqueID)") {
            while !entry.stopSignal.isStopped {
                do throws(CaptureError) {
                    guard let sample = try entry.stream.nextSample() else {
                        if !entry.stopSignal.isStopped { context.streamEnded(entry, generation) }
                        return
                    }
                    context.deliver(sample, entry.input)
                } catch {
                    if !entry.stopSignal.isStopped { context.streamFailed(entry, error, generation) }
                    return
                }
            }
        }
    }
}
