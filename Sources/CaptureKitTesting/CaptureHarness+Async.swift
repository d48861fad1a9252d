import CaptureKit

/// The harness from async code (tests): the same calls as the synchronous ones, run on a thread
/// outside the cooperative pool. A step blocks until its samples are delivered (in real pace, until
/// the wall clock reaches its end); called directly from a test it would hold one of the pool's
/// threads (two on a two-core machine) all that time, and every other test waiting for a thread —
/// its timers' wake-ups, its continuations — would wait with it. In an async context these
/// overloads are the ones chosen; the synchronous ones remain for callers on their own threads.
extension CaptureHarness {
    /// `start()`, off the cooperative pool.
    public func start() async throws(CaptureError) {
        try await blocking { () throws(CaptureError) in try self.start() }
    }

    /// `advance(by:)`, off the cooperative pool.
    public func advance(by duration: MediaTime) async throws(CaptureError) {
        try await blocking { () throws(CaptureError) in try self.advance(by: duration) }
    }

    /// `advance(by:)` in seconds, off the cooperative pool.
    public func advance(by seconds: Double) async throws(CaptureError) {
        try await blocking { () throws(CaptureError) in try self.advance(by: seconds) }
    }

    /// `advance(toFrame:)`, off the cooperative pool.
    public func advance(toFrame count: Int) async throws(CaptureError) {
        try await blocking { () throws(CaptureError) in try self.advance(toFrame: count) }
    }

    /// Stops the movie (at the current virtual time) and the session, then reads the movie back;
    /// the stop's synchronous steps and the analysis run off the cooperative pool.
    public func finish(analyze: Bool = true) async -> Recording {
        await withTaskExecutorPreference(BlockingWorkExecutor.shared) { await self.finishOffPool(analyze: analyze) }
    }

    /// Runs the synchronous `work` on `BlockingWorkExecutor`'s threads (a task executor preference:
    /// the harness is not `Sendable`, so it stays in this task rather than moving to a thread).
    private func blocking(_ work: () throws(CaptureError) -> Void) async throws(CaptureError) {
        try await withTaskExecutorPreference(BlockingWorkExecutor.shared) { () async throws(CaptureError) in try work() }
    }
}
