import CaptureKit
import CaptureKitTesting
import Foundation

/// Waits until `condition` holds or `timeout` passes; returns whether it holds (the shared
/// deadline-bounded wait of CaptureKitTesting, under the name these tests use).
@discardableResult
func waitFor(timeout: Duration, _ condition: () -> Bool) async -> Bool {
    await waitUntil(timeout: timeout, condition)
}

extension MovieFileOutput {
    /// Returns once every delegate callback queued so far has run: a request that fails at once
    /// (here: a file name without a movie extension) queues its finish behind them on the
    /// output's one serial delegate queue.
    func flushDelegateQueue() async {
        let probe = RecordingFinished()
        startRecording(to: NSTemporaryDirectory() + "capturekit-flush-\(UUID().uuidString).invalid", recordingDelegate: probe)
        await waitFor(timeout: .seconds(30)) { probe.finishCount > 0 }
    }
}

/// A recording delegate that counts every callback, so a test can wait for the finish and then
/// assert how many there were.
final class RecordingFinished: CaptureFileOutputRecordingDelegate {
    private let state = Locked<(starts: Int, finishes: [(summary: RecordingSummary, error: CaptureError?)])>((0, []))

    var startCount: Int { state.withLock { $0.starts } }
    var finishCount: Int { state.withLock { $0.finishes.count } }
    var errors: [CaptureError?] { state.withLock { $0.finishes.map(\.error) } }

    func fileOutput(_ output: MovieFileOutput, didStartRecordingTo path: String, from connections: [CaptureConnection]) {
        state.withLock { $0.starts += 1 }
    }

    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        state.withLock { $0.finishes.append((summary, error)) }
    }

    /// The first finish's summary, once it arrives (nil after `timeout`).
    func summary(timeout: Duration) async -> RecordingSummary? {
        await waitFor(timeout: timeout) { finishCount > 0 }
        return state.withLock { $0.finishes.first?.summary }
    }
}
