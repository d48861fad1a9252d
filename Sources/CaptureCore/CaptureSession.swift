import Foundation
import Synchronization

/// Something that happened to a running session (AVCaptureSession's notifications).
public enum SessionEvent: Sendable {
    case started
    case stopped
    case runtimeError(CaptureError)
    case streamEnded(deviceID: String)
}

/// Coordinates inputs and outputs and moves samples between them (AVCaptureSession).
///
/// In virtual pace one pump thread merges every input's stream in PTS order (video before audio
/// at equal PTS) and delivers only while some output wants samples, so the same seed always
/// produces the same recording. In real-time pace each input has its own thread, paced by its device.
public final class CaptureSession: Sendable {
    public let pace: CapturePace
    private let state = Mutex(State())
    private let events = EventBroadcaster<SessionEvent>()
    /// Wakes the virtual-time pump when demand changes or the session stops.
    private let wake = NSConditionBox()

    struct State {
        var inputs: [CaptureDeviceInput] = []
        var outputs: [any CaptureOutput] = []
        var connections: [CaptureConnection] = []
        var isRunning = false
        var run: Run?
    }

    /// The resources of one start…stop span.
    final class Run: Sendable {
        let streams: [(input: CaptureDeviceInput, stream: any DriverStream)]
        let finished = DispatchGroup()
        let stopSignal = StopSignal()
        init(streams: [(input: CaptureDeviceInput, stream: any DriverStream)]) { self.streams = streams }
    }

    public init(pace: CapturePace = .virtual) {
        self.pace = pace
    }

    // MARK: Inputs and outputs

    public var inputs: [CaptureDeviceInput] { state.withLock { $0.inputs } }
    public var outputs: [any CaptureOutput] { state.withLock { $0.outputs } }
    public var connections: [CaptureConnection] { state.withLock { $0.connections } }
    public var isRunning: Bool { state.withLock { $0.isRunning } }

    /// Session events as an AsyncSequence.
    public func eventStream() -> AsyncStream<SessionEvent> { events.subscribe() }

    /// One input per device per session; not while running (the stream set is fixed per run).
    public func canAddInput(_ input: CaptureDeviceInput) -> Bool {
        state.withLock { s in
            !s.isRunning && input.device.isConnected && !s.inputs.contains { $0.device === input.device }
        }
    }

    public func addInput(_ input: CaptureDeviceInput) throws(CaptureError) {
        guard canAddInput(input) else {
            throw .invalidArgument("cannot add input \(input.device): already in the session, disconnected, or the session is running")
        }
        state.withLock { s in
            s.inputs.append(input)
            rebuildConnections(&s)
        }
    }

    public func removeInput(_ input: CaptureDeviceInput) {
        state.withLock { s in
            s.inputs.removeAll { $0 === input }
            rebuildConnections(&s)
        }
    }

    public func canAddOutput(_ output: any CaptureOutput) -> Bool {
        state.withLock { s in !s.isRunning && !s.outputs.contains { $0 === output } && output.attachment.connections.isEmpty }
    }

    public func addOutput(_ output: any CaptureOutput) throws(CaptureError) {
        guard canAddOutput(output) else {
            throw .invalidArgument("cannot add output \(type(of: output)): already in a session, or the session is running")
        }
        state.withLock { s in
            s.outputs.append(output)
            rebuildConnections(&s)
        }
    }

    public func removeOutput(_ output: any CaptureOutput) {
        let removed = state.withLock { s -> Bool in
            guard s.outputs.contains(where: { $0 === output }) else { return false }
            s.outputs.removeAll { $0 === output }
            rebuildConnections(&s)
            return true
        }
        if removed {
            output.sessionDidStop()
            output.attachment.detach()
        }
    }

    /// One connection per compatible (input, output) pair.
    private func rebuildConnections(_ s: inout State) {
        var connections: [CaptureConnection] = []
        for output in s.outputs {
            var mine: [CaptureConnection] = []
            for input in s.inputs where output.accepts(input.mediaType) {
                // Keep an existing connection object (and its settings) when it still applies.
                let existing = s.connections.first { $0.input === input && $0.output === output }
                mine.append(existing ?? CaptureConnection(input: input, output: output))
            }
            output.attachment.attach(connections: mine, pace: pace) { [weak self] in self?.wake.signal() }
            connections += mine
        }
        s.connections = connections
    }

    // MARK: Running

    /// Opens every input's stream and starts delivering; returns once running, or throws.
    public func startRunning() throws(CaptureError) {
        let (inputs, outputs) = try state.withLock { (s: inout State) throws(CaptureError) in
            guard !s.isRunning else { throw CaptureError.invalidState("the session is already running") }
            return (s.inputs, s.outputs)
        }
        var streams: [(input: CaptureDeviceInput, stream: any DriverStream)] = []
        do {
            for input in inputs {
                let device = input.device
                let configuration = StreamConfiguration(
                    format: device.activeFormat, frameDuration: device.activeVideoMinFrameDuration, pace: pace)
                streams.append((input, try device.driverDevice().makeStream(configuration)))
            }
            let anchor = HostClock.now()
            for entry in streams { try entry.stream.start(at: anchor) }
        } catch {
            for entry in streams { entry.stream.stop() }
            events.send(.runtimeError(error))
            throw error
        }
        let run = Run(streams: streams)
        state.withLock { s in
            s.isRunning = true
            s.run = run
        }
        for output in outputs { output.attachment.setRunning(true) }
        wake.reset()
        switch pace {
        case .virtual: spawn(run, name: "CaptureKit.pump") { self.pumpVirtual(run) }
        case .realtime:
            for entry in streams {
                spawn(run, name: "CaptureKit.pump.\(entry.input.device.uniqueID)") { self.pumpRealtime(entry, run) }
            }
        }
        events.send(.started)
    }

    /// Stops every stream, waits for delivery to end, then lets outputs finish (a recording finalizes).
    public func stopRunning() {
        guard let run = state.withLock({ s -> Run? in
            let run = s.run
            s.run = nil
            s.isRunning = false
            return run
        }) else { return }
        run.stopSignal.stop()
        for entry in run.streams { entry.stream.stop() }
        wake.signal()
        if !Thread.current.isCaptureKitPump { run.finished.wait() }
        for output in outputs {
            output.attachment.setRunning(false)
            output.sessionDidStop()
        }
        events.send(.stopped)
    }

    private func spawn(_ run: Run, name: String, _ body: @escaping @Sendable () -> Void) {
        run.finished.enter()
        let thread = Thread {
            body()
            run.finished.leave()
        }
        thread.name = name
        thread.start()
    }

    /// Delivers one sample to every enabled connection of its input.
    private func deliver(_ sample: SampleBuffer, from input: CaptureDeviceInput) {
        let targets = state.withLock { s in s.connections.filter { $0.input === input && $0.isEnabled } }
        for connection in targets { connection.output.receive(sample, from: connection) }
    }

    private func anyOutputWantsSamples() -> Bool {
        outputs.contains { $0.wantsSamples }
    }

    private func report(_ error: CaptureError) {
        events.send(.runtimeError(error))
    }

    /// Virtual time: merge streams by PTS, advancing only while someone wants samples.
    private func pumpVirtual(_ run: Run) {
        var pending: [SampleBuffer?] = Array(repeating: nil, count: run.streams.count)
        var live = Array(repeating: true, count: run.streams.count)
        while !run.stopSignal.isStopped {
            if !anyOutputWantsSamples() {
                wake.wait(while: { !run.stopSignal.isStopped && !self.anyOutputWantsSamples() })
                continue
            }
            for i in run.streams.indices where live[i] && pending[i] == nil {
                do {
                    pending[i] = try run.streams[i].stream.nextSample()
                    if pending[i] == nil {
                        live[i] = false
                        events.send(.streamEnded(deviceID: run.streams[i].input.device.uniqueID))
                    }
                } catch {
                    live[i] = false
                    report(error)
                }
            }
            // Earliest PTS first; video wins ties so a recording can start on a frame.
            var best: Int?
            for i in pending.indices {
                guard let candidate = pending[i] else { continue }
                if let b = best, let current = pending[b] {
                    if candidate.presentationTime < current.presentationTime
                        || (candidate.presentationTime == current.presentationTime
                            && candidate.mediaType == .video && current.mediaType != .video) {
                        best = i
                    }
                } else {
                    best = i
                }
            }
            guard let chosen = best, let sample = pending[chosen] else {
                // Every stream ended: idle until stopped.
                wake.wait(while: { !run.stopSignal.isStopped })
                continue
            }
            pending[chosen] = nil
            deliver(sample, from: run.streams[chosen].input)
        }
    }

    /// Real time: deliver each sample as its device produces it.
    private func pumpRealtime(_ entry: (input: CaptureDeviceInput, stream: any DriverStream), _ run: Run) {
        while !run.stopSignal.isStopped {
            do {
                guard let sample = try entry.stream.nextSample() else {
                    if !run.stopSignal.isStopped { events.send(.streamEnded(deviceID: entry.input.device.uniqueID)) }
                    return
                }
                deliver(sample, from: entry.input)
            } catch {
                report(error)
                return
            }
        }
    }
}

extension Thread {
    /// True on a session's delivery thread, where waiting for that thread would deadlock.
    var isCaptureKitPump: Bool { name?.hasPrefix("CaptureKit.pump") ?? false }
}

/// A condition a thread can wait on until a predicate clears; signalled from any thread.
final class NSConditionBox: @unchecked Sendable {
    // The NSCondition is the only state; it is thread-safe by construction.
    private let condition = NSCondition()
    private var generation = 0

    func signal() {
        condition.lock()
        generation += 1
        condition.broadcast()
        condition.unlock()
    }

    func reset() {}

    /// Waits while `predicate` holds, re-checking on every signal (and every 100 ms as a safety net).
    func wait(while predicate: () -> Bool) {
        condition.lock()
        defer { condition.unlock() }
        while predicate() {
            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.1))
        }
    }
}
