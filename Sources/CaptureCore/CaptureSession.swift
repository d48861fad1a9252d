// The session's state, start and stop, and its streams. Configuration, manual stepping, device
// availability (interruptions) and delivery are in CaptureSession+*.swift; all of them read and
// write the one `state` under one lock and signal one condition (`wake`). The pumps live in
// VirtualPump.swift and RealtimePump.swift and see that state only through `PumpContext`.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Coordinates inputs and outputs and moves samples between them (AVCaptureSession).
///
/// - Virtual pace: one pump thread merges every input's stream in PTS order (video before audio
///   at equal PTS) and delivers only while some output wants samples, so the same seed always
///   produces the same recording. Real-time pace: each input has its own thread, paced by its device.
/// - Configuration: `beginConfiguration`/`commitConfiguration` nest; inputs, outputs and the preset
///   change at once in the lists, but connections, formats and streams follow only at the
///   outermost commit. Inputs and outputs may be added and removed while running.
/// - One device object streams to one running session at a time: starting a second session whose
///   input is already streaming elsewhere throws `deviceInUse` (adding the input is allowed).
/// - The default preset is `high` (as AVFoundation): adding a camera picks its largest format up to
///   1080p30. Set `inputPriority` first, or change the device's format after adding it, to choose.
public final class CaptureSession: Sendable {
    public let pace: CapturePace
    /// Moves samples for this pace: `VirtualPump` or `RealtimePump`.
    let pump: any SessionPump
    let state = Locked(State())
    let events = EventBroadcaster<SessionEvent>()
    /// Wakes the virtual-time pump when demand or the stream set changes, or the session stops.
    let wake = NSConditionBox()
    /// Serialises starting, stopping and interruptions, each of which may take a while (streams
    /// start, pumps are joined): a stop never interleaves with a start. Pump threads never take it.
    let transitions = NSLock()
    /// Serialises handing connections to outputs (`applyChanges`) with taking an output away
    /// (`removeOutput`): otherwise a rebuild that read the output list just before a removal could
    /// attach the removed output afterwards, leaving it "already in a session" for good (found by
    /// RandomAPIStressTests). Taken before `state`, never by pump threads.
    let attachments = NSLock()
    let availabilityToken = Locked<Int?>(nil)

    struct State {
        var inputs: [CaptureDeviceInput] = []
        var outputs: [any CaptureOutput] = []
        var connections: [CaptureConnection] = []
        var preset = SessionPreset.high
        /// What the preset chose per device, to notice when an app changes the format itself.
        var presetFormats: [String: DeviceFormat] = [:]
        var configurationDepth = 0
        /// The app asked the session to run (stays true through interruptions).
        var wantsRunning = false
        var interruption: InterruptionReason?
        var streams: [StreamEntry] = []
        var virtualNow = MediaTime.zero
        var hostAnchor = MediaTime.zero
        var pumps = DispatchGroup()
        /// Which run this is: bumped by every start and every resume after an interruption. Stops
        /// requested from inside a run (a failed or ended stream, a pump thread) stop only that run.
        var generation = 0
        /// Manual stepping (virtual pace): the pump delivers only what a step allows.
        var stepping: Stepping?
    }

    /// One input's running stream.
    final class StreamEntry: Sendable {
        let input: CaptureDeviceInput
        let stream: any DriverStream
        let stopSignal = StopSignal()
        /// The device's registration of this stream for live reconfiguration (`addLiveStream`).
        let liveToken = Locked<Int?>(nil)
        init(input: CaptureDeviceInput, stream: any DriverStream) {
            self.input = input
            self.stream = stream
        }
    }

    public init(pace: CapturePace = .virtual) {
        self.pace = pace
        self.pump = pace == .virtual ? VirtualPump() : RealtimePump()
    }

    deinit {
        if let token = availabilityToken.withLock({ $0 }) { DeviceAvailability.shared.removeObserver(token) }
        // An output's attachment holds its connections and each connection holds the output: a
        // session dropped without removeOutput left that cycle behind (LeakSanitizer, ci/sanitize).
        for output in state.withLock({ $0.outputs }) { output.attachment.detach() }
    }

    // MARK: Inspection

    public var inputs: [CaptureDeviceInput] { state.withLock { $0.inputs } }
    public var outputs: [any CaptureOutput] { state.withLock { $0.outputs } }
    public var connections: [CaptureConnection] { state.withLock { $0.connections } }
    /// True while samples flow (false during an interruption).
    public var isRunning: Bool { state.withLock { $0.wantsRunning && $0.interruption == nil } }
    public var isInterrupted: Bool { state.withLock { $0.interruption != nil } }

    /// Session events as an AsyncSequence.
    public func eventStream() -> AsyncStream<SessionEvent> { events.subscribe() }

    // MARK: Running

    /// Starts every input's stream and returns once running; throws (and posts a runtime error) on failure.
    public func startRunning() throws(CaptureError) {
        guard !PumpThread.isDelivering(for: self) else {
            throw .invalidState("startRunning() on the session's own delivery thread (inside an output's receive); call it from another thread")
        }
        // The audio session of each microphone's registry decides whether this app may record.
        for input in inputs where input.device.mediaType == .audio {
            try AudioSession.governing(input.device)?.checkRecordingAllowed("recording from \(input.device.uniqueID)")
        }
        transitions.lock()
        defer { transitions.unlock() }
        try state.withLock { (s: inout State) throws(CaptureError) in
            guard s.configurationDepth == 0 else {
                throw CaptureError.invalidState("startRunning() inside beginConfiguration/commitConfiguration; commit first")
            }
            guard !s.wantsRunning else { throw CaptureError.invalidState("the session is already running") }
            s.wantsRunning = true
            s.interruption = nil
            s.virtualNow = .zero
            if s.stepping != nil { s.stepping = Stepping() }
            s.hostAnchor = HostClock.now()
            s.pumps = DispatchGroup()
            s.generation += 1
        }
        observeAvailability()
        applyChanges(startingStreams: false)
        do {
            if let reason = unavailableReason() {
                state.withLock { $0.interruption = reason }
                events.send(.interrupted(reason))
                return
            }
            // Every stream of one start shares one anchor, so simulated A/V content lines up.
            try syncStreams(anchor: state.withLock { $0.hostAnchor })
        } catch {
            stopStreams()
            state.withLock { $0.wantsRunning = false }
            for output in outputs { output.attachment.setRunning(false) }
            events.send(.runtimeError(error))
            throw error
        }
        for output in outputs { output.attachment.setRunning(true) }
        pump.runStarted(pumpContext)
        events.send(.started)
    }

    /// Stops every stream, waits for delivery to end, then lets outputs finish (a recording finalizes).
    /// On one of this session's delivery threads (an output's `receive`), where waiting for delivery
    /// to end would wait for the caller itself, the stop happens just after the call returns, on
    /// another thread, and only if the session is still in the run the call came from.
    public func stopRunning() {
        guard !PumpThread.isDelivering(for: self) else {
            let generation = state.withLock { $0.generation }
            DispatchQueue.global().async { self.stop(generation: generation) }
            return
        }
        stop(generation: nil)
    }

    /// Which run the session is in (see `State.generation`).
    var runGeneration: Int { state.withLock { $0.generation } }

    /// Stops the session, or only the run `generation` (nil: whichever runs).
    func stop(generation: Int?) {
        transitions.lock()
        defer { transitions.unlock() }
        let wasRunning = state.withLock { s -> Bool in
            guard s.wantsRunning, generation == nil || generation == s.generation else { return false }
            s.wantsRunning = false
            s.interruption = nil
            return true
        }
        guard wasRunning else { return }
        stopStreams()
        wake.signal()
        state.withLock { $0.pumps }.wait()
        for output in outputs {
            output.attachment.setRunning(false)
            output.sessionDidStop()
        }
        events.send(.stopped)
    }

    /// Starts streams for inputs that lack one and stops those whose input left. Real-time streams
    /// start at `anchor` (shared by a start) or now (an input added while running); virtual ones at
    /// the current virtual time.
    func syncStreams(anchor requested: MediaTime?) throws(CaptureError) {
        let (inputs, entries, virtualNow) = state.withLock { s in (s.inputs, s.streams, s.virtualNow) }
        let anchor = pump.streamAnchor(virtualNow: virtualNow, requested: requested)
        for entry in entries where !inputs.contains(where: { $0 === entry.input }) {
            stop(entry)
        }
        for input in inputs where !entries.contains(where: { $0.input === input }) {
            let device = input.device
            try DeviceUsage.shared.claim(device, by: self)
            do {
                var configuration = StreamConfiguration(format: device.activeFormat,
                                                        frameDuration: device.activeVideoMinFrameDuration, pace: pace)
                // The audio session's preferred IO buffer duration sets the microphone's buffer size.
                if let rate = device.activeFormat.audioFormat?.sampleRate,
                   let frames = AudioSession.governing(device)?.framesPerBuffer(sampleRate: rate) {
                    configuration.audioFramesPerBuffer = frames
                }
                let stream = try device.driverDevice().makeStream(configuration)
                try stream.start(at: anchor)
                let entry = StreamEntry(input: input, stream: stream)
                // Live reconfiguration: a format or frame-duration change made while this stream runs
                // reaches it at its next frame boundary. Streams that cannot switch live keep their
                // configuration until the next start.
                if let live = stream as? any ReconfigurableStream {
                    let token = device.addLiveStream { change throws(CaptureError) in try live.reconfigure(change) }
                    entry.liveToken.withLock { $0 = token }
                }
                state.withLock { $0.streams.append(entry) }
                pump.streamStarted(entry, pumpContext)
            } catch {
                DeviceUsage.shared.release(device, by: self)
                throw error
            }
        }
    }

    func stop(_ entry: StreamEntry) {
        if let token = entry.liveToken.withLock({ t in defer { t = nil }; return t }) { entry.input.device.removeLiveStream(token) }
        entry.stopSignal.stop()
        entry.stream.stop()
        state.withLock { s in s.streams.removeAll { $0 === entry } }
        DeviceUsage.shared.release(entry.input.device, by: self)
    }

    func stopStreams() {
        for entry in state.withLock({ $0.streams }) { stop(entry) }
    }

    private func spawn(name: String, _ body: @escaping @Sendable () -> Void) {
        let group = state.withLock { $0.pumps }
        group.enter()
        let realtime = pace == .realtime
        let thread = Thread { [self] in
            PumpThread.markDelivering(for: self)
            if realtime { LatencySensitiveThread.requestShortSlice() }
            body()
            group.leave()
        }
        thread.name = name
        thread.start()
    }

    /// What the pump sees of this session (see `PumpContext` for why it is closures over `state`).
    var pumpContext: PumpContext {
        PumpContext(
            generation: { self.state.withLock { $0.generation } },
            isActive: { generation in
                self.state.withLock { $0.wantsRunning && $0.interruption == nil && $0.generation == generation }
            },
            streams: { self.state.withLock { $0.streams } },
            outputs: { self.outputs },
            wake: wake,
            spawn: { name, body in self.spawn(name: name, body) },
            deliver: { sample, input in self.deliver(sample, from: input) },
            streamEnded: { entry, generation in self.streamEnded(entry, generation: generation) },
            streamFailed: { entry, error, generation in self.streamFailed(entry, error, generation: generation) },
            parkForStep: { self.state.withLock { $0.parkForStep() } },
            stepRequested: { self.state.withLock { $0.stepping?.requested } },
            stepBlocks: { sample in self.state.withLock { $0.stepping?.blocks(sample) == true } },
            willDeliver: { sample in self.state.withLock { $0.willDeliver(sample) } })
    }
}
