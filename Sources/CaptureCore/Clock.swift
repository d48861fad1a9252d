import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How a stream's samples are paced.
///
/// - `virtual`: samples are produced as fast as the pipeline consumes them and never dropped; PTS
///   follow the frame/sample count exactly. The clock stands still while no output wants samples.
/// - `realtime`: production is paced to the monotonic clock, like a physical device.
public enum CapturePace: String, Sendable, Hashable, Codable, CaseIterable {
    case virtual
    case realtime
}

/// The host's monotonic clock (`CLOCK_MONOTONIC`) — the clock V4L2 and ALSA timestamp with.
public enum HostClock {
    public static func now() -> MediaTime {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return MediaTime(value: Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec), timescale: 1_000_000_000)
    }
}

/// A flag that threads can wait on with a deadline; used to interrupt paced sleeps on stop.
public final class StopSignal: Sendable {
    // `stopped` is written only while holding `condition`'s lock (so a waiter, which checks it under
    // that lock, cannot miss the broadcast); atomic so that `isStopped` and the checks stay checked.
    private let condition = NSCondition()
    private let stopped = Atomic<Bool>(false)

    public init() {}

    public var isStopped: Bool {
        condition.lock(); defer { condition.unlock() }
        return stopped.load(ordering: .relaxed)
    }

    public func stop() {
        condition.lock()
        stopped.store(true, ordering: .relaxed)
        condition.broadcast()
        condition.unlock()
    }

    /// Sleeps until the host clock reaches `deadline`; returns false if stopped first.
    public func sleep(untilHostTime deadline: MediaTime) -> Bool {
        condition.lock(); defer { condition.unlock() }
        while !stopped.load(ordering: .relaxed) {
            let remaining = (deadline - HostClock.now()).seconds
            if remaining <= 0 { return true }
            _ = condition.wait(until: Date(timeIntervalSinceNow: remaining))
        }
        return false
    }
}
