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
package final class DeliveryThread: @unchecked Sendable {
    // `condition` guards `jobs` and `running`.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var next = 0
    private var running = false
    private let name: String

    package init(name: String) {
        self.name = name
    }

    /// Whether the thread exists now (it ends after a second without work).
    package var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return running
    }

    /// Runs `job` on the delivery thread after every job given before it.
    package func enqueue(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        let start = !running
        running = true
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
        while next == jobs.count {
            if !condition.wait(until: deadline) && next == jobs.count {
                jobs.removeAll()
                next = 0
                running = false
                return nil
            }
        }
        let job = jobs[next]
        next += 1
        if next == jobs.count {
            jobs.removeAll(keepingCapacity: true)
            next = 0
        }
        return job
    }
}
