import CaptureCore
import Foundation

/// Frames from a simulated camera: each frame takes the camera's control state in effect when it
/// starts, is rendered through it, and reports back. PTS advance by the frame duration, or by the
/// exposure time when that is longer (plus the start time in real time).
///
/// Live reconfiguration: a new format or frame duration (`reconfigure`) takes effect at the next
/// frame boundary: the next frame starts where the previous one ended, is rendered in the new format
/// (a new buffer pool; buffers of the old one still held by consumers stay valid) and lasts the new
/// duration; frame indices (the stamps) continue.
final class SimulatedVideoStream: ReconfigurableStream {
    private let camera: SimulatedCamera
    private let stopSignal = StopSignal()
    private let state = Locked<(next: Int64, offset: MediaTime, previous: MediaTime?, anchor: MediaTime)>((0, .zero, nil, .zero))
    private let setup: Locked<SimulatedStreamSetup>
    private let pending = Locked<(setup: SimulatedStreamSetup, applied: [@Sendable (MediaTime) -> Void])?>(nil)
    private let faults = Locked<SimulatorScenario.VideoFaults?>(nil)
    private let timeline = Locked(VideoFaultState())

    /// What the scenario's `FaultTimeline` has done to this stream so far.
    struct VideoFaultState {
        var origin = MediaTime.zero
        var registered = false
        var dropRemaining = 0
        var jitterLimit: Int64 = 0
        var jitterEnd = Int64.max
        /// Frames starting before this point of the fault clock are lost (a stall).
        var stallUntil: MediaTime?
        var corruptions: [FrameCorruption] = []
        var duplicateNext = false
        var duplicate: SampleBuffer?
        /// Frames still to hand back flagged as failed (`bufferError`).
        var bufferErrors = 0
    }

    /// Virtual pace: the next frame, rendered on `renderQueue` while this one is delivered (and
    /// encoded), so rendering and encoding overlap (or by the delivering thread, if the queue has
    /// not begun it when it is due). It is used only if it is exactly the frame this
    /// stream would render at its turn: same index, setup and timing, and the camera's state untouched
    /// since it was planned (`SimulatedCamera.commit`: no control set, no frame begun or ended).
    /// Otherwise it is thrown away and the frame rendered again, so frames never depend on it.
    private final class FrameAhead: Sendable {
        let index: Int64
        let offset: MediaTime
        let previous: MediaTime?
        let setup: SimulatedStreamSetup
        let buffer: PixelBuffer
        let planned: SimulatedCamera.PlannedFrame
        /// Written by whoever claimed the render, before `rendered` is signalled; read only after
        /// waiting for it.
        var measurements: FrameMeasurements? { result.withLock { $0 } }
        private let result = Locked<FrameMeasurements?>(nil)
        let rendered = DispatchSemaphore(value: 0)
        /// The render: run once, by `renderQueue` or by the delivering thread, whichever claims it first.
        private let render: @Sendable () -> FrameMeasurements
        private let claimed = Locked(false)

        init(index: Int64, offset: MediaTime, previous: MediaTime?, setup: SimulatedStreamSetup, buffer: PixelBuffer,
             planned: SimulatedCamera.PlannedFrame, render: @escaping @Sendable () -> FrameMeasurements) {
            self.index = index
            self.offset = offset
            self.previous = previous
            self.setup = setup
            self.buffer = buffer
            self.planned = planned
            self.render = render
        }

        /// Takes the render for the caller: true once, for the first to ask.
        private func claim() -> Bool { claimed.withLock { c in defer { c = true }; return !c } }

        /// Renders the frame if nobody has begun to; false if someone has.
        func runIfUnclaimed() -> Bool {
            guard claim() else { return false }
            let measured = render()
            result.withLock { $0 = measured }
            rendered.signal()
            return true
        }

        /// The render's result: rendered here if `renderQueue` has not begun it yet (with x264's
        /// threads holding both cores, the queue's worker could wait a scheduler slice or more for
        /// one while this thread, already running, stalls the encoder's input), otherwise waited
        /// for. Either way the renderer is free again on return. True if it rendered here.
        func finish() -> Bool {
            if runIfUnclaimed() { return true }
            wait()
            return false
        }

        /// The frame is not wanted: nobody renders it if nobody has begun to; a render under way is
        /// waited for.
        func cancel() {
            if claim() { rendered.signal() } else { wait() }
        }

        /// Waits for the render (the renderer is then free again).
        func wait() { rendered.wait(); rendered.signal() }
    }
    private let ahead = Locked<FrameAhead?>(nil)
    private let renderQueue = DispatchQueue(label: "CaptureSimulator.renderAhead")

    init(camera: SimulatedCamera, setup: SimulatedStreamSetup) {
        self.camera = camera
        self.setup = Locked(setup)
    }

    /// The shake of frame `index` as the plan asks for it (nil: none).
    private func motion(_ plan: SimulatedCamera.FramePlan, index: Int64) -> FrameMotion? {
        guard plan.shakeAmplitude > 0 || plan.stabilization != .off else { return nil }
        return CameraShake.motion(seed: camera.seed ^ SimulatorDriver.hash(camera.profile.uniqueID), frame: index,
                                  amplitude: plan.shakeAmplitude, mode: plan.stabilization)
    }

    /// Starts rendering frame `index` ahead (virtual pace, uncompressed frames, a free buffer).
    private func renderAhead(index: Int64, offset: MediaTime, previous: MediaTime?, setup: SimulatedStreamSetup) {
        guard setup.configuration.pace == .virtual, setup.compression == nil, camera.scenario.rendersAhead,
              pending.withLock({ $0 == nil }), !stopSignal.isStopped, let buffer = setup.pool.makeBuffer() else { return }
        // Planned here, on the delivering thread, so a control set after this call (while this
        // frame is delivered) always voids the frame rendered ahead, whenever the render runs.
        let configuration = setup.configuration, renderer = setup.renderer
        let planned = camera.planAhead(format: configuration.format, frameDuration: configuration.frameDuration,
                                       width: renderer.width, height: renderer.height)
        let plan = planned.plan, motion = self.motion(plan, index: index)
        let frame = FrameAhead(index: index, offset: offset, previous: previous, setup: setup, buffer: buffer, planned: planned) {
            renderer.render(frame: index, effects: plan.effects, syncFlash: SyntheticFrameRenderer.showsSyncFlash(offset: offset, previous: previous),
                            metering: plan.metering, motion: motion, into: buffer, items: plan.items)
        }
        ahead.withLock { $0 = frame }
        if !camera.scenario.leavesRenderAheadToDeliverer { renderQueue.async { _ = frame.runIfUnclaimed() } }
    }

    /// The frame rendered ahead, if it is frame `index` at `offset` in `setup` and the camera could
    /// begin it as planned (its state then moves exactly as `beginFrame` would move it), rendered
    /// here if the render queue has not begun it; a frame not wanted is never begun or is waited
    /// for, so either way the renderer is free on return.
    private func takeAhead(index: Int64, offset: MediaTime, previous: MediaTime?, setup: SimulatedStreamSetup) -> FrameAhead? {
        guard let frame = ahead.withLock({ a in defer { a = nil }; return a }) else { return nil }
        // Whether it is still the frame to deliver does not depend on its pixels, so a frame the
        // queue has not begun is dropped unrendered, and one it has begun is waited for.
        guard frame.index == index, frame.offset == offset, frame.previous == previous, frame.setup === setup,
              camera.commit(frame.planned) else {
            frame.cancel()
            camera.scenario.countRenderAhead(used: false)
            return nil
        }
        if frame.finish() { camera.scenario.countRenderAheadByDeliverer() }
        camera.scenario.countRenderAhead(used: true)
        return frame
    }

    func reconfigure(_ change: StreamReconfiguration) throws(CaptureError) {
        let current = pending.withLock { $0?.setup } ?? setup.withLock { $0 }
        let next: SimulatedStreamSetup
        if change.format == current.configuration.format {
            guard change.format.supports(frameDuration: change.frameDuration) else {
                throw .formatNotSupported("frame duration \(change.frameDuration) on \(change.format.formatDescription)")
            }
            next = current.with(frameDuration: change.frameDuration)
        } else {
            var configuration = current.configuration
            configuration.format = change.format
            configuration.frameDuration = change.frameDuration
            next = try camera.makeSetup(configuration)
        }
        pending.withLock { p in p = (next, (p?.applied ?? []) + [change.applied]) }
    }

    /// Real time: PTS on the host clock from `hostTime`; virtual time: from the session's virtual now.
    func start(at hostTime: MediaTime) throws(CaptureError) {
        state.withLock { $0 = (0, .zero, nil, hostTime) }
        if let stale = ahead.withLock({ a in defer { a = nil }; return a }) { stale.cancel() }
        faults.withLock { $0 = camera.scenario.videoFaults(camera.profile.uniqueID) }
        let origin = camera.scenario.faultClock(startingAt: hostTime, device: camera.profile.uniqueID)
        timeline.withLock { $0 = VideoFaultState(origin: origin, registered: true) }
    }

    /// Applies the timeline's events due at frame `index` (starting at `start`); true if the
    /// stream was stopped while an interruption it fired took effect.
    private func applyDueFaults(index: Int64, start: MediaTime, pace: CapturePace) -> Bool {
        let origin = timeline.withLock { $0.origin }
        let elapsed = start - origin
        for (number, event) in camera.scenario.takeDueFaults(device: camera.profile.uniqueID, elapsed: elapsed, frame: index) {
            switch event.fault {
            case .dropFrames(let count): timeline.withLock { $0.dropRemaining += count }
            case .jitter(let microseconds, let frames):
                timeline.withLock {
                    $0.jitterLimit = microseconds
                    $0.jitterEnd = frames == 0 ? .max : index + Int64(frames)
                }
            case .stall(let milliseconds):
                let from: MediaTime = if case .time(let t) = event.at { t } else { elapsed }
                timeline.withLock { $0.stallUntil = from + MediaTime(value: Int64(milliseconds), timescale: 1000) }
            case .corruptFrame(let kind): timeline.withLock { $0.corruptions.append(kind) }
            case .duplicateFrame: timeline.withLock { $0.duplicateNext = true }
            case .bufferError: timeline.withLock { $0.bufferErrors += 1 }
            default:
                if let wait = camera.scenario.perform(number, event, pace: pace), wait.waitUntilApplied(or: stopSignal) { return true }
            }
        }
        return false
    }

    /// Whether the timeline loses frame `index` starting at `start` (a drop burst or a stall).
    private func timelineLoses(index: Int64, start: MediaTime) -> Bool {
        timeline.withLock { s in
            if s.dropRemaining > 0 {
                s.dropRemaining -= 1
                return true
            }
            if let until = s.stallUntil {
                if start - s.origin < until { return true }
                s.stallUntil = nil
            }
            return false
        }
    }

    /// Damages a compressed frame as scripted: cut in half after its headers (EOI lost), its SOI
    /// marker overwritten, or its entropy-coded data replaced by seeded random bytes.
    static func damage(_ buffer: PixelBuffer, _ kind: FrameCorruption, seed: UInt64) throws(CaptureError) {
        var bytes = buffer.withCompressedData { Array($0) }
        guard bytes.count > 4 else { return }
        // The entropy-coded data starts after the SOS segment.
        var dataStart = 2
        if let sos = (0..<(bytes.count - 3)).first(where: { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA }) {
            dataStart = min(bytes.count - 2, sos + 2 + (Int(bytes[sos + 2]) << 8 | Int(bytes[sos + 3])))
        }
        switch kind {
        case .truncated:
            bytes.removeSubrange((dataStart + (bytes.count - dataStart) / 2)...)
        case .badMarker:
            bytes[0] = 0x00
            bytes[1] = 0x00
        case .garbage:
            var random = SeededRandom(seed: seed)
            for i in dataStart..<(bytes.count - 2) {
                // No 0xFF: the damage stays inside the entropy-coded data (no stray markers).
                let byte = UInt8(truncatingIfNeeded: random.next())
                bytes[i] = byte == 0xFF ? 0xFE : byte
            }
        }
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
        defer { copy.deallocate() }
        copy.copyBytes(from: bytes)
        try buffer.setCompressedData(UnsafeRawBufferPointer(copy))
    }

    /// The scripted jitter of frame `index`: uniform in ±`limit` µs, from (seed, device, index).
    private func jitter(_ index: Int64, limit: Int64) -> MediaTime {
        guard limit > 0 else { return .zero }
        var random = SeededRandom(seed: camera.seed ^ SimulatorDriver.hash(camera.profile.uniqueID) ^ (UInt64(bitPattern: index) &* 0x9e37_79b9_7f4a_7c15))
        let span = UInt64(2 * limit + 1)
        return MediaTime(value: Int64(random.next() % span) - limit, timescale: 1_000_000)
    }

    /// Buffers in the stream's pool, as many as a typical V4L2 capture queue.
    static let bufferCount = 8

    /// The pool's size for a frame size: `bufferCount`, but at most about 48 MB of frames (never
    /// fewer than 4), as drivers queue fewer buffers of a 4K frame: 8 up to 1080p, 4 at 3840x2160.
    static func bufferCount(width: Int, height: Int) -> Int {
        let frameBytes = max(1, width * height * 3 / 2)
        return min(bufferCount, max(4, (48 << 20) / frameBytes))
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        // A scripted duplicate: the frame just delivered, again (same pixels, sequence number, PTS).
        if let duplicate = timeline.withLock({ s in defer { s.duplicate = nil }; return s.duplicate }) {
            return stopSignal.isStopped ? nil : duplicate
        }
        var lost = 0
        var scriptedLoss = false
        var applied: [@Sendable (MediaTime) -> Void] = []
        while true {
            if stopSignal.isStopped { return nil }
            guard camera.scenario.isPluggedIn(camera.profile.uniqueID) else { throw .deviceDisconnected(camera.profile.uniqueID) }
            let (index, offset, previous, anchor) = state.withLock { ($0.next, $0.offset, $0.previous, $0.anchor) }
            // The fault timeline's events due at this frame (an unplug makes it the first one lost).
            if applyDueFaults(index: index, start: anchor + offset, pace: self.setup.withLock { $0.configuration.pace }) { return nil }
            guard camera.scenario.isPluggedIn(camera.profile.uniqueID) else { throw .deviceDisconnected(camera.profile.uniqueID) }
            // A frame boundary: a pending reconfiguration applies from this frame on (its handlers
            // fire with the first frame delivered, past any lost ones).
            if let change = pending.withLock({ p in defer { p = nil }; return p }) {
                setup.withLock { $0 = change.setup }
                applied += change.applied
            }
            let setup = self.setup.withLock { $0 }
            let configuration = setup.configuration, renderer = setup.renderer, compression = setup.compression
            let early = takeAhead(index: index, offset: offset, previous: previous, setup: setup)
            let plan = early?.planned.plan ?? camera.beginFrame(format: configuration.format, frameDuration: configuration.frameDuration,
                                                                  width: renderer.width, height: renderer.height)
            let step = plan.exposureSeconds > configuration.frameDuration.seconds
                ? MediaTime(seconds: plan.exposureSeconds, preferredTimescale: 1_000_000) : configuration.frameDuration
            let faults = self.faults.withLock { $0 }
            let scripted = timeline.withLock { index < $0.jitterEnd ? $0.jitterLimit : 0 }
            let pts = anchor + offset + jitter(index, limit: max(faults?.jitterMicroseconds ?? 0, scripted))
            // Real time: a frame is available once it has been exposed, at its start time plus its
            // duration. It is rendered during that exposure (before the wait, not after it), so
            // the render's time never adds to the latency from PTS to delivery.
            let realtime = configuration.pace == .realtime
            var exposed = false
            state.withLock { s in
                s.next = index + 1
                s.previous = offset
                s.offset = offset + step
            }
            if faults?.droppedFrames.contains(index) == true || timelineLoses(index: index, start: anchor + offset) {
                // A scripted device drop: the frame is never delivered; the next one reports the gap.
                lost += 1
                scriptedLoss = true
                continue
            }
            if timeline.withLock({ s in guard s.bufferErrors > 0 else { return false }; s.bufferErrors -= 1; return true }) {
                // A buffer the driver flagged as failed: lost like a drop, reported as corrupt data (as V4L2 does).
                camera.scenario.deviceEvents.post(.samplesDropped(deviceID: camera.profile.uniqueID, reason: .corruptData, count: 1,
                                                                  presentationTime: pts))
                lost += 1
                scriptedLoss = true
                continue
            }
            var acquired: PixelBuffer?
            if let early { acquired = early.buffer } else { acquired = try acquireBuffer(setup) }
            if acquired == nil && realtime {
                // No free buffer yet: a consumer may return one before the exposure ends.
                guard stopSignal.sleep(untilHostTime: pts + step) else { return nil }
                exposed = true
                acquired = try acquireBuffer(setup)
            }
            guard let buffer = acquired else {
                if stopSignal.isStopped { return nil }
                // Real time: every buffer is held by a consumer, so this frame is lost, as on a device.
                lost += 1
                continue
            }
            let measurements = early?.measurements ?? renderer.render(
                frame: index, effects: plan.effects, syncFlash: SyntheticFrameRenderer.showsSyncFlash(offset: offset, previous: previous),
                metering: plan.metering, motion: motion(plan, index: index), into: compression?.scratch ?? buffer, items: plan.items)
            if !plan.items.isEmpty {
                camera.scenario.recordSceneTruth(camera.profile.uniqueID, SceneTruthFrame(
                    frameIndex: index, presentationTime: pts, frameSize: Dimensions(width: renderer.width, height: renderer.height),
                    items: renderer.sceneTruth(frame: index, items: plan.items, zoom: plan.effects.zoom)))
            }
            if let compression { try compression.compressor.compress(compression.scratch, into: buffer) }
            if let corruption = timeline.withLock({ s in s.corruptions.isEmpty ? nil : s.corruptions.removeFirst() }), compression != nil {
                try Self.damage(buffer, corruption, seed: camera.seed ^ SimulatorDriver.hash(camera.profile.uniqueID) ^ UInt64(bitPattern: index))
            }
            camera.endFrame(plan, measurements: measurements, presentationTime: pts)
            if realtime && !exposed {
                guard stopSignal.sleep(untilHostTime: pts + step) else { return nil }
            }
            for handler in applied { handler(pts) }
            let sample = SampleBuffer(payload: .pixels(buffer), formatDescription: setup.format,
                                      presentationTime: pts, duration: step, sequenceNumber: index,
                                      discontinuity: lost > 0 ? Discontinuity(count: lost, reason: scriptedLoss ? .discontinuity : .outOfBuffers) : nil)
            timeline.withLock { s in
                if s.duplicateNext {
                    s.duplicateNext = false
                    s.duplicate = SampleBuffer(payload: .pixels(buffer), formatDescription: setup.format,
                                               presentationTime: pts, duration: step, sequenceNumber: index)
                }
            }
            renderAhead(index: index + 1, offset: offset + step, previous: offset, setup: setup)
            return sample
        }
    }

    /// Real time: a buffer now, or nil and the frame is lost. Virtual time: virtual time stops
    /// until a consumer returns a buffer, however long that takes, so what is captured never
    /// depends on how fast consumers are; nil only when stopped. A consumer that keeps every
    /// buffer for `scenario.bufferStarvationTimeout` of wall time is reported as a deadlock
    /// (`buffersNotReturned`: the session posts it as a runtime error and stops).
    private func acquireBuffer(_ setup: SimulatedStreamSetup) throws(CaptureError) -> PixelBuffer? {
        let pool = setup.pool
        guard setup.configuration.pace == .virtual else { return pool.makeBuffer() }
        let timeout = camera.scenario.bufferStarvationTimeout
        switch pool.waitForBuffer(timeout: timeout, isCancelled: { stopSignal.isStopped }) {
        case .buffer(let buffer): return buffer
        case .cancelled: return nil
        case .timedOut:
            throw .buffersNotReturned(device: camera.profile.uniqueID, buffers: pool.maximumBufferCount ?? Self.bufferCount,
                                      seconds: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        }
    }

    func stop() {
        stopSignal.stop()
        setup.withLock { $0 }.pool.wakeWaiters()
        if timeline.withLock({ s in defer { s.registered = false }; return s.registered }) {
            camera.scenario.streamStopped(device: camera.profile.uniqueID)
        }
    }
}
