#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a pthread mutex: CaptureKit's one lock type, used wherever state is shared
/// between threads.
///
/// Why not the standard library's `Synchronization.Mutex`: on Linux its contended path hands the
/// lock over with `FUTEX_LOCK_PI`/`FUTEX_UNLOCK_PI` syscalls that ThreadSanitizer cannot see, so
/// every contended `withLock` looked like a data race and the sanitizer runs needed a suppression
/// that could also hide real races. ThreadSanitizer intercepts `pthread_mutex_lock`/`unlock`, so
/// with this type a TSan report is a real finding. The API mirrors `Mutex` (`withLock` with
/// `sending` values) so values that are not `Sendable` may live inside, as with `Mutex`.
///
/// The mutex lives in its own allocation: a `pthread_mutex_t` must not move once initialised,
/// and a stored property of a class has no stable address Swift promises.
public final class Locked<Value: ~Copyable>: @unchecked Sendable {  // unchecked: `value` only between pthread lock/unlock
    // @unchecked: `value` is only read or written between lock and unlock of `mutex`.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    // The mutex already makes every access exclusive (a re-entrant `withLock` deadlocks before it
    // could alias), so the runtime's dynamic exclusivity check on each access is skipped: it cost
    // more than the lock itself (about 80 instructions a call).
    @exclusivity(unchecked) private var value: Value

    public init(_ initialValue: consuming sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        value = initialValue
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the value.
    public func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
