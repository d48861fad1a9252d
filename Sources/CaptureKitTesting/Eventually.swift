import Foundation

/// The error `eventually` throws when its deadline passes first: it names what was awaited.
public struct WaitTimedOut: Error, CustomStringConvertible, Sendable {
    /// What the caller waited for, as it named it.
    public let what: String
    /// How long it waited.
    public let timeout: Duration

    public var description: String { "timed out after \(timeout) waiting for \(what)" }
}

/// Waits until `condition` holds, re-checking it every millisecond or few while suspended (no
/// thread is held between checks), and throws `WaitTimedOut` naming `what` when `timeout` passes
/// first. The one deadline-bounded poll of the test suites: prefer awaiting an event (an
/// `AsyncSequence`, a continuation) where the code under test offers one, and use this where a
/// state is only observable by reading it.
///
///     try await eventually("the movie to start recording") { movie.isRecording }
public func eventually(_ what: @autoclosure () -> String, timeout: Duration = .seconds(60),
                       _ condition: () throws -> Bool) async throws {
    if try await poll(until: timeout, condition) { return }
    throw WaitTimedOut(what: what(), timeout: timeout)
}

/// `eventually` for callers that decide themselves what a timeout means: true once `condition`
/// holds, false when `timeout` passed first.
@discardableResult
public func waitUntil(timeout: Duration, _ condition: () throws -> Bool) async rethrows -> Bool {
    try await poll(until: timeout, condition)
}

private func poll(until timeout: Duration, _ condition: () throws -> Bool) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var interval = Duration.microseconds(500)
    while try !condition() {
        guard clock.now < deadline else { return false }
        // A suspension, not a blocked thread: the cooperative pool runs other tasks meanwhile.
        try? await Task.sleep(for: interval)
        interval = min(interval * 2, .milliseconds(10))
    }
    return true
}

/// Runs blocking work (a process wait, a blocking read, a wall-clock wait, a synchronous step) on a
/// thread of its own and suspends the caller until it returns, so the cooperative pool's threads
/// (two on a two-core machine) stay free for other tasks meanwhile.
public func offThePool<T: Sendable, Failure: Error>(_ work: @escaping @Sendable () throws(Failure) -> T) async throws(Failure) -> T {
    let result: Result<T, Failure> = await withCheckedContinuation { continuation in
        let thread = Thread {
            do throws(Failure) { continuation.resume(returning: .success(try work())) } catch { continuation.resume(returning: .failure(error)) }
        }
        thread.stackSize = 8 << 20
        thread.start()
    }
    return try result.get()
}

/// A task executor whose jobs run on Dispatch threads outside the cooperative pool (Dispatch adds
/// threads when one blocks). Synchronous calls that block — `CaptureHarness.advance` waiting for a
/// step's delivery or the wall clock — run their async wrappers here.
final class BlockingWorkExecutor: TaskExecutor {
    static let shared = BlockingWorkExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        // A serial queue of its own per job: it targets Dispatch's overcommitting root queue, which
        // gives it a thread at once however many others block (a concurrent queue's root would cap
        // them at the core count). A task's jobs run one after another, so order is kept.
        DispatchQueue(label: "capturekit.testing.blocking").async { job.runSynchronously(on: executor) }
    }
}

/// `waitUntil` for synchronous callers on threads of their own (a `ScenarioRunner` scenario, the
/// blocking half of `CaptureHarness`), never on the cooperative pool: blocks until `condition`
/// holds; false when `timeout` passed first.
@discardableResult
public func blockUntil(timeout: Duration, _ condition: () -> Bool) -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var microseconds: UInt32 = 100
    while !condition() {
        guard clock.now < deadline else { return false }
        usleep(microseconds)
        microseconds = min(microseconds * 2, 5_000)
    }
    return true
}
