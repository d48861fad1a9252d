// Over 500 lines, on purpose: configuration, start/stop, interruptions and manual stepping all
// read and write the one private `state` under one lock and signal one condition (`wake`). The
// pumps live in VirtualPump.swift and RealtimePump.swift and see that state only through `PumpContext`.
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
    private let pump: any SessionPump
    private let state = Locked(State())
    private let events = EventBroadcaster<SessionEvent>()
    /// Wakes the virtual-time pump when demand or the stream set changes, or the session stops.
    private let wake = NSConditionBox()
    /// Serialises starting, stopping and interruptions, each of which may take a while (streams
    /// start, pumps are joined): a stop never interleaves with a start. Pump threads never take it.
    private let transitions = NSLock()
    /// Serialises handing connections to outputs (`applyChanges`) with taking an output away
    /// (`removeOutput`): otherwise a rebuild that read the output list just before a removal could
    /// attach the removed output afterwards, leaving it "already in a session" for good (found by
    /// RandomAPIStressTests). Taken before `state`, never by pump threads.
    private let attachments = NSLock()
    private let availabilityToken = Locked<Int?>(nil)

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

    // MARK: Configuration

    public func beginConfiguration() {
        state.withLock { $0.configurationDepth += 1 }
    }

    /// Applies everything changed since the outermost `beginConfiguration`.
    public func commitConfiguration() {
        let outermost = state.withLock { s -> Bool in
            guard s.configurationDepth > 0 else { return false }
            s.configurationDepth -= 1
            return s.configurationDepth == 0
        }
        if outermost { applyChanges() }
    }

    private func changed() {
        if state.withLock({ $0.configurationDepth == 0 }) { applyChanges() }
    }

    /// The preset in force; `inputPriority` once an app has chosen a device format itself.
    public var sessionPreset: SessionPreset {
        state.withLock { s in
            guard s.preset != .inputPriority else { return .inputPriority }
            for input in s.inputs where input.mediaType == .video {
                if let chosen = s.presetFormats[input.device.uniqueID], chosen != input.device.activeFormat {
                    return .inputPriority
                }
            }
            return s.preset
        }
    }

    /// True when every video input has a format for the preset.
    public func canSetSessionPreset(_ preset: SessionPreset) -> Bool {
        preset == .inputPriority || inputs.filter { $0.mediaType == .video }.allSatisfy { preset.format(for: $0.device) != nil }
    }

    public func setSessionPreset(_ preset: SessionPreset) throws(CaptureError) {
        guard canSetSessionPreset(preset) else {
            throw .invalidArgument("preset \(preset.rawValue) is not supported by the session's video devices; check canSetSessionPreset first")
        }
        state.withLock {
            $0.preset = preset
            $0.presetFormats = [:]
        }
        changed()
    }

    // MARK: Inputs and outputs

    public func canAddInput(_ input: CaptureDeviceInput) -> Bool {
        state.withLock { s in input.device.isConnected && !s.inputs.contains { $0.device === input.device } }
    }

    public func addInput(_ input: CaptureDeviceInput) throws(CaptureError) {
        // Check and add in one step: two threads adding the same camera must not both succeed.
        let added = state.withLock { s -> Bool in
            guard input.device.isConnected, !s.inputs.contains(where: { $0.device === input.device }) else { return false }
            s.inputs.append(input)
            return true
        }
        guard added else {
            throw .invalidArgument("cannot add input \(input.device): it is already in the session or disconnected; check canAddInput first")
        }
        changed()
    }

    public func removeInput(_ input: CaptureDeviceInput) {
        state.withLock { s in s.inputs.removeAll { $0 === input } }
        changed()
    }

    public func canAddOutput(_ output: any CaptureOutput) -> Bool {
        state.withLock { s in !s.outputs.contains { $0 === output } && output.attachment.connections.isEmpty }
    }

    public func addOutput(_ output: any CaptureOutput) throws(CaptureError) {
        // Check and add in one step: two threads adding the same output must not both succeed.
        let added = state.withLock { s -> Bool in
            guard !s.outputs.contains(where: { $0 === output }), output.attachment.connections.isEmpty else { return false }
            s.outputs.append(output)
            return true
        }
        guard added else {
            throw .invalidArgument("cannot add output \(type(of: output)): it is already in a session; check canAddOutput first")
        }
        changed()
    }

    public func removeOutput(_ output: any CaptureOutput) {
        attachments.lock()
        let removed = state.withLock { s -> Bool in
            guard s.outputs.contains(where: { $0 === output }) else { return false }
            s.outputs.removeAll { $0 === output }
            return true
        }
        guard removed else { attachments.unlock(); return }
        output.sessionDidStop()
        output.attachment.detach()
        attachments.unlock()
        changed()
    }

    /// Rebuilds connections, applies the preset and, while running, starts/stops streams to match.
    private func applyChanges(startingStreams: Bool = true) {
        let preset = sessionPreset
        attachments.lock()
        var gone: [CaptureConnection] = []
        let (outputs, connections, running) = state.withLock { s -> ([any CaptureOutput], [CaptureConnection], Bool) in
            var connections: [CaptureConnection] = []
            for output in s.outputs {
                for input in s.inputs where output.accepts(input.mediaType) {
                    // Keep an existing connection object (and its settings) when it still applies.
                    connections.append(s.connections.first { $0.input === input && $0.output === output }
                                       ?? CaptureConnection(input: input, output: output))
                }
            }
            gone = s.connections.filter { old in old.mediaType == .video && !connections.contains { $0 === old } }
            s.connections = connections
            return (s.outputs, connections, s.wantsRunning && s.interruption == nil)
        }
        // A connection that went away no longer asks its device to stabilize.
        for connection in gone { connection.input.device.requestStabilization(.off, by: ObjectIdentifier(connection)) }
        for output in outputs {
            output.attachment.attach(connections: connections.filter { $0.output === output }, pace: pace,
                                     preset: preset) { [weak self] in
                self?.wake.signal()
            }
            output.attachment.setRunning(running)
        }
        attachments.unlock()
        applyPreset()
        if running && startingStreams {
            do {
                try syncStreams(anchor: nil)
            } catch {
                events.send(.runtimeError(error))
            }
        }
        wake.signal()
    }

    /// Sets each video device's format for the preset (through the device's own lock).
    private func applyPreset() {
        let (preset, inputs) = state.withLock { ($0.preset, $0.inputs) }
        guard preset != .inputPriority else { return }
        for input in inputs where input.mediaType == .video {
            let device = input.device
            guard let format = preset.format(for: device) else { continue }
            if state.withLock({ $0.presetFormats[device.uniqueID] }) == format { continue }
            do {
                try device.lockForConfiguration()
                defer { device.unlockForConfiguration() }
                if device.activeFormat != format { try device.setActiveFormat(format) }
                state.withLock { $0.presetFormats[device.uniqueID] = format }
            } catch {
                events.send(.runtimeError(error))
            }
        }
    }

    // MARK: Running

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

    private func step(_ change: (inout Stepping) -> Void) throws(CaptureError) {
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

    private func unavailableReason() -> InterruptionReason? {
        inputs.lazy.compactMap { DeviceAvailability.shared.reason(for: $0.device) }.first
    }

    private func observeAvailability() {
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

    /// Starts streams for inputs that lack one and stops those whose input left. Real-time streams
    /// start at `anchor` (shared by a start) or now (an input added while running); virtual ones at
    /// the current virtual time.
    private func syncStreams(anchor requested: MediaTime?) throws(CaptureError) {
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

    private func stop(_ entry: StreamEntry) {
        if let token = entry.liveToken.withLock({ t in defer { t = nil }; return t }) { entry.input.device.removeLiveStream(token) }
        entry.stopSignal.stop()
        entry.stream.stop()
        state.withLock { s in s.streams.removeAll { $0 === entry } }
        DeviceUsage.shared.release(entry.input.device, by: self)
    }

    private func stopStreams() {
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
    private var pumpContext: PumpContext {
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

    // MARK: Delivery

    /// Delivers one sample to every enabled connection of its input.
    private func deliver(_ sample: SampleBuffer, from input: CaptureDeviceInput) {
        let targets = state.withLock { s in s.connections.filter { $0.input === input && $0.isEnabled } }
        for connection in targets {
            if let gap = sample.discontinuity { connection.output.didDrop(gap, before: sample, from: connection) }
            connection.output.receive(sample, from: connection)
        }
    }

    /// A stream failed (e.g. its device was unplugged): as AVFoundation, the session posts the
    /// runtime error and stops, so outputs finish (a recording finalizes a playable file).
    private func streamFailed(_ entry: StreamEntry, _ error: CaptureError, generation: Int) {
        stop(entry)
        if case .deviceDisconnected = error { entry.input.device.markDisconnected() }
        events.send(.runtimeError(error))
        // Off the delivery thread (stopping waits for the pumps, this one included), and only this
        // run: a new start in the meantime keeps running.
        DispatchQueue.global().async { self.stop(generation: generation) }
    }

    /// A stream reported its end (a replayed fixture ran out): once every stream has ended the
    /// session stops, so outputs finish (a recording finalizes its file).
    private func streamEnded(_ entry: StreamEntry, generation: Int) {
        stop(entry)
        events.send(.streamEnded(deviceID: entry.input.device.uniqueID))
        if state.withLock({ $0.streams.isEmpty }) {
            DispatchQueue.global().async { self.stop(generation: generation) }
        }
    }
}
