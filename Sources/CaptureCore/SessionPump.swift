import CThreadScheduling
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// How a session moves samples from its streams to its outputs: `VirtualPump` (virtual pace) or
/// `RealtimePump`. A session holds the one its pace chose and calls it at the same points whatever
/// the pace. Stopping is the same for both and stays with the session: stop the streams (their
/// stop signals end real-time threads), signal the session's condition (wakes a virtual pump),
/// then join the run's pump threads (one `DispatchGroup` per run, see `PumpContext.spawn`).
protocol SessionPump: Sendable {
    /// Whether `advance(by:)`/`advance(toFrame:)` can drive this pump.
    var supportsManualStepping: Bool { get }
    /// Where a stream started now begins: the session's virtual now, or `requested` (the anchor
    /// shared by one start) and else the host clock's now.
    func streamAnchor(virtualNow: MediaTime, requested: MediaTime?) -> MediaTime
    /// A run has started or resumed after an interruption: its streams have started and its
    /// outputs run. Called with `PumpContext.generation` already that run's.
    func runStarted(_ context: PumpContext)
    /// A stream of the current run started (at a start or resume, or for an input added while running).
    func streamStarted(_ entry: CaptureSession.StreamEntry, _ context: PumpContext)
}

/// What a pump may see and do of its session, handed over explicitly so the session's `state`
/// stays private. The state closures take the session's one lock, on purpose: a pump's "is my run
/// still active?" and "does the step allow this sample?", the session's start/stop/interruption
/// transitions and `advance`'s wait all read wantsRunning, interruption, generation and stepping
/// together, and `advance` waits on that same state through the one condition (`wake`); one
/// `State` under one lock keeps those reads consistent without a lock order between types.
/// Closures hold the session strongly, as its pump threads always did, until the thread ends.
struct PumpContext: Sendable {
    /// The session's current run (`State.generation`).
    let generation: @Sendable () -> Int
    /// True while the session runs, uninterrupted, still in run `generation`.
    let isActive: @Sendable (_ generation: Int) -> Bool
    /// The running streams, in the order they started.
    let streams: @Sendable () -> [CaptureSession.StreamEntry]
    let outputs: @Sendable () -> [any CaptureOutput]
    /// The session's condition: signalled when demand, the stream set or a step changes, or the session stops.
    let wake: NSConditionBox
    /// Runs `body` on a new thread counted in the run's pump group (joined by a stop) and marked
    /// with `PumpThread` as this session's delivery thread.
    let spawn: @Sendable (_ name: String, _ body: @escaping @Sendable () -> Void) -> Void
    /// Hands a sample to every enabled connection of its input.
    let deliver: @Sendable (SampleBuffer, CaptureDeviceInput) -> Void
    /// A stream ended or failed in run `generation` (the session stops that run as needed).
    let streamEnded: @Sendable (CaptureSession.StreamEntry, _ generation: Int) -> Void
    let streamFailed: @Sendable (CaptureSession.StreamEntry, CaptureError, _ generation: Int) -> Void
    /// Manual stepping (nil: not stepping). `parkForStep` records that the pump has delivered all
    /// the current step allows (`parkedAt = requested`) and returns that step.
    let parkForStep: @Sendable () -> Int?
    let stepRequested: @Sendable () -> Int?
    /// True when stepping holds `sample` back (`Stepping.blocks`).
    let stepBlocks: @Sendable (SampleBuffer) -> Bool
    /// Moves virtual now to a sample about to be delivered and counts its video frames for a step.
    let willDeliver: @Sendable (SampleBuffer) -> Void
}

/// Marks each session's delivery threads (a thread-local value naming the session), so a session
/// knows when it is called on one of its own pumps, where waiting for the pumps would deadlock.
enum PumpThread {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-local key left")
        return key
    }()

    /// Called first on a new pump thread. The session is not retained: the value is only compared.
    static func markDelivering(for session: CaptureSession) {
        pthread_setspecific(key, Unmanaged.passUnretained(session).toOpaque())
    }

    /// True on one of `session`'s pump threads.
    static func isDelivering(for session: CaptureSession) -> Bool {
        pthread_getspecific(key) == Unmanaged.passUnretained(session).toOpaque()
    }
}

/// A condition a thread can wait on until a predicate clears; signalled from any thread.
final class NSConditionBox: Sendable {
    // The NSCondition is the only state; it is thread-safe by construction.
    private let condition = NSCondition()

    func signal() {
        condition.lock()
        condition.broadcast()
        condition.unlock()
    }

    /// Waits while `predicate` holds, re-checking on every signal. No wake-up is lost: whoever
    /// changes what the predicate reads signals afterwards, and `signal` takes this condition's
    /// lock, which the waiter holds from its check until `wait` releases it.
    func wait(while predicate: () -> Bool) {
        condition.lock()
        defer { condition.unlock() }
        while predicate() {
            condition.wait()
        }
    }
}

/// A real-time pump sleeps until its device has a frame and must then hand it on at once, while
/// x264's threads may hold both cores. It asks the kernel for a short slice (0.1 ms), which lets it
/// preempt sooner when it wakes (Linux ≥ 6.12's EEVDF; older kernels take and ignore it); its share
/// of the CPU is unchanged. Measured with the encoder busy (issue 17, target 4): p99 capture →
/// delegate 37.2–41.1 → 35.5–36.7 ms at 1080p30, 36.8–37.0 → 34.4–35.5 ms at 640x480.
package enum LatencySensitiveThread {
    /// The slice asked for. Asking for it from inside a delegate (on whichever libdispatch worker ran
    /// it) gained nothing measurable; a data output's own `DeliveryThread` asks for it instead.
    static let slice: UInt64 = 100_000

    /// Called first on a new real-time pump or delivery thread.
    package static func requestShortSlice() {
        _ = ck_request_thread_slice(slice)
    }
}
