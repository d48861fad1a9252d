import Foundation

/// A real-time output's own thread for calling the app's delegate. A `DispatchQueue.async` hop
/// wakes one of libdispatch's worker threads, which then waits for a core like any other thread
/// while x264 holds both: at 1080p30 with a movie encoding beside it, the pump handed frames on
/// 33.7–34.3 ms after their capture at p99, the delegate ran at 36.2–40.5 ms (35.1–35.8 with this
/// thread; `capture-bench latency --busy`, 5 alternating 15 s runs each). This thread asks for the
/// pumps' short slice (`LatencySensitiveThread`) and enters the app's queue with `sync`, which runs
/// the callback on this thread when the queue is free (on the queue, in order, one at a time, as
/// `async` would) and waits its turn when the app keeps the queue busy. Jobs run in the order given.
/// The thread ends after a second without work and starts again with the next job, so an output
/// never owns a thread it does not use, and nothing ever waits for it to end (a delegate may stop
/// the session from this very thread).
package final class DeliveryThread: Sendable {
    // Every use of `state` is made holding `condition`'s lock, so a waiter cannot miss a job; the
    // state's own (uncontended) lock is what lets the compiler check the type.
    private let condition = NSCondition()
    private let state = Locked(State())
    private let name: String

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var next = 0
        var running = false
    }

    package init(name: String) {
        self.name = name
    }

    /// Whether the thread exists now (it ends after a second without work).
    package var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return state.withLock { $0.running }
    }

    /// Runs `job` on the delivery thread after every job given before it.
    package func enqueue(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        let start = state.withLock { s -> Bool in
            s.jobs.append(job)
            defer { s.running = true }
            return !s.running
        }
        condition.signal()
        condition.unlock()
        if start {
            let thread = Thread { self.run() }
            thread.name = name
            thread.start()
        }
    }

    private func run() {
        LatencySensitiveThread.requestShortSlice()
        while let job = take() { job() }
    }

    /// The next job, or nil (and the thread marked stopped) after a second with none.
    private func take() -> (@Sendable () -> Void)? {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: 1)
        while state.withLock({ $0.next == $0.jobs.count }) {
            if !condition.wait(until: deadline) {
                let idle = state.withLock { s -> Bool in
                    guard s.next == s.jobs.count else { return false }
                    s.jobs.removeAll()
                    s.next = 0
                    s.running = false
                    return true
                }
                if idle { return nil }
            }
        }
        return state.withLock { s in
            let job = s.jobs[s.next]
            s.next += 1
            if s.next == s.jobs.count {
                s.jobs.removeAll(keepingCapacity: true)
                s.next = 0
            }
            return job
        }
    }
}
