import CaptureKit
import CaptureKitTesting
import Dispatch
import Foundation
import Testing

/// The shared deadline-bounded wait and the off-the-pool runner the suites use instead of sleeps.
@Suite struct EventuallyTests {
    @Test func eventuallyReturnsOnceTheConditionHolds() async throws {
        let flag = Locked(false)
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { flag.withLock { $0 = true } }
        try await eventually("the flag") { flag.withLock { $0 } }
        #expect(flag.withLock { $0 })
    }

    @Test func eventuallyFailsNamingWhatItWaitedFor() async {
        do {
            try await eventually("the door to open", timeout: .milliseconds(30)) { false }
            Issue.record("no timeout")
        } catch let error as WaitTimedOut {
            #expect(error.what == "the door to open")
            #expect(error.description.hasPrefix("timed out after"))
            #expect(error.description.hasSuffix("waiting for the door to open"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test func waitUntilAndBlockUntilReportTimeouts() async {
        #expect(await waitUntil(timeout: .milliseconds(20)) { false } == false)
        #expect(await waitUntil(timeout: .seconds(5)) { true })
        #expect(blockUntil(timeout: .milliseconds(20)) { false } == false)
        #expect(blockUntil(timeout: .seconds(5)) { true })
    }

    /// Eight blocking waits at once, each released only once all eight run: on the cooperative pool
    /// (two threads on two cores) they would deadlock; on threads of their own they all finish.
    @Test func offThePoolRunsMoreBlockingWaitsThanThePoolHasThreads() async throws {
        let started = Locked(0)
        let gate = DispatchSemaphore(value: 0)
        let results = try await withThrowingTaskGroup(of: Int.self) { group in
            for i in 0..<8 {
                group.addTask {
                    await offThePool { () -> Int in
                        started.withLock { $0 += 1 }
                        gate.wait()
                        return i
                    }
                }
            }
            try await eventually("all 8 blocking waits to start", timeout: .seconds(60)) { started.withLock { $0 } == 8 }
            for _ in 0..<8 { gate.signal() }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.sorted() == Array(0..<8))
    }

    @Test func offThePoolPassesTypedErrorsThrough() async {
        await #expect(throws: CaptureError.self) {
            try await offThePool { () throws(CaptureError) -> Int in throw CaptureError.invalidState("boom") }
        }
    }
}
