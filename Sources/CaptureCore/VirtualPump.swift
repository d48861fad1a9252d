/// Virtual time: one pump thread per run merges every stream by PTS (one pending sample per
/// stream; earliest PTS wins, video wins ties) and pulls only while some output is `.ready` and
/// none is `.busy`, else waits on the session's condition; no polling and no wall clock, so the
/// same seed always produces the same recording. With manual stepping it delivers only what the
/// current step allows, then parks.
struct VirtualPump: SessionPump {
    var supportsManualStepping: Bool { true }

    func streamAnchor(virtualNow: MediaTime, requested: MediaTime?) -> MediaTime { virtualNow }

    func runStarted(_ context: PumpContext) {
        let generation = context.generation()
        context.spawn("CaptureKit.pump") { Self.run(generation, context) }
    }

    /// Nothing to do: the run's one thread picks new streams up on its next pass.
    func streamStarted(_ entry: CaptureSession.StreamEntry, _ context: PumpContext) {}

    private static func run(_ generation: Int, _ context: PumpContext) {
        let wake = context.wake
        var pending: [ObjectIdentifier: SampleBuffer] = [:]
        func active() -> Bool { context.isActive(generation) }
        func anyOutputWantsSamples() -> Bool {
            let demands = context.outputs().map(\.demand)
            return demands.contains(.ready) && !demands.contains(.busy)
        }
        /// Waits while `blocked`; with manual stepping, first says which step it has finished
        /// (what `advance` waits for), and says so again for every step that changes nothing.
        func park(while blocked: @escaping () -> Bool) {
            while active() && blocked() {
                let seen = context.parkForStep()
                wake.signal()
                wake.wait(while: { active() && blocked() && context.stepRequested() == seen })
            }
        }
        while active() {
            if !anyOutputWantsSamples() {
                // Busy outputs will want samples again (the step is not done); idle ones will not
                // until something changes (the step is done: nothing more can be delivered).
                if context.outputs().contains(where: { $0.demand == .busy }) {
                    wake.wait(while: { active() && !anyOutputWantsSamples() })
                } else {
                    park(while: { !anyOutputWantsSamples() })
                }
                continue
            }
            let entries = context.streams()
            let live = Set(entries.map { ObjectIdentifier($0) })
            pending = pending.filter { live.contains($0.key) }
            for entry in entries where pending[ObjectIdentifier(entry)] == nil && !entry.stopSignal.isStopped {
                do throws(CaptureError) {
                    if let sample = try entry.stream.nextSample() {
                        pending[ObjectIdentifier(entry)] = sample
                    } else if !entry.stopSignal.isStopped {
                        // nil from a stream the session stopped (an interruption) is no end.
                        context.streamEnded(entry, generation)
                    }
                } catch {
                    context.streamFailed(entry, error, generation)
                }
            }
            // Earliest PTS first; video wins ties so a recording can start on a frame.
            var best: (entry: CaptureSession.StreamEntry, sample: SampleBuffer)?
            for entry in entries {
                guard let candidate = pending[ObjectIdentifier(entry)] else { continue }
                if let current = best?.sample {
                    let earlier = candidate.presentationTime < current.presentationTime
                    let tieToVideo = candidate.presentationTime == current.presentationTime
                        && candidate.mediaType == .video && current.mediaType != .video
                    if earlier || tieToVideo { best = (entry, candidate) }
                } else {
                    best = (entry, candidate)
                }
            }
            guard let chosen = best else {
                // No stream left: idle until one is added or the session stops.
                if entries.isEmpty { park(while: { context.streams().isEmpty }) }
                continue
            }
            // Manual stepping: the next sample waits for the step that allows it (it stays pending).
            if context.stepBlocks(chosen.sample) {
                park(while: { context.stepBlocks(chosen.sample) })
                continue
            }
            pending[ObjectIdentifier(chosen.entry)] = nil
            context.willDeliver(chosen.sample)
            context.deliver(chosen.sample, chosen.entry.input)
        }
    }
}

extension CaptureSession {
    /// What the steppable (virtual) pump may deliver, and whether it has done so. Lives in the
    /// session's `State`, under its lock, with the run it belongs to.
    struct Stepping {
        /// Samples with a PTS before this are delivered (in PTS order, as always).
        var limit = MediaTime.zero
        /// `advance(toFrame:)`: video frames delivered in this run must reach this count.
        var frameTarget: Int?
        var videoDelivered = 0
        /// Steps asked for so far, and the last one the pump had seen when it stopped to wait for the
        /// next (it has delivered everything that step allows): what `advance` waits for.
        var requested = 0
        var parkedAt = -1

        func blocks(_ sample: SampleBuffer) -> Bool {
            // Nothing before the first step, not even a frame whose jitter puts its PTS before the
            // start (that frame used to race whatever the caller set up between start and step).
            if requested == 0 { return true }
            if let frameTarget { return sample.mediaType == .video && videoDelivered >= frameTarget }
            return !(sample.presentationTime < limit)
        }
    }
}

extension CaptureSession.State {
    /// The pump has delivered all the current step allows: records it (what `advance` waits for)
    /// and returns that step (nil: not stepping).
    mutating func parkForStep() -> Int? {
        guard var stepping else { return nil }
        stepping.parkedAt = stepping.requested
        self.stepping = stepping
        return stepping.requested
    }

    /// A sample is about to be delivered: virtual now moves to it; a video frame counts for a step.
    mutating func willDeliver(_ sample: SampleBuffer) {
        virtualNow = max(virtualNow, sample.presentationTime)
        if sample.mediaType == .video { stepping?.videoDelivered += 1 }
    }
}
