import CaptureKit
import Foundation

/// The outputs' delegate: records what arrives (on the outputs' serial queues) under a lock.
final class Collector: VideoDataOutputSampleBufferDelegate, AudioDataOutputSampleBufferDelegate, MetadataOutputObjectsDelegate,
                       Sendable {
    struct State {
        var delivered = CaptureHarness.Delivered()
        var errors: [CaptureHarness.DeliveredError] = []
        /// The end (seconds) of the last sample delivered per device, and overall.
        var lastEnd: [String: Double] = [:]
        var latestEnd = 0.0
        var lastEndByMedia: [MediaType: Double] = [:]
        /// The end of the step being delivered (interruptions are stamped with it).
        var stepEnd = 0.0
        /// Samples at or after this PTS (seconds) are not counted: the step `finish()` takes to
        /// stop the movie is not part of the run.
        var cutoff = Double.infinity
        var sawStopped = false
        /// Host-clock seconds of the run's start in real time (0 in virtual time, whose PTS start
        /// at 0): every time recorded here counts from the run's start.
        var origin = 0.0
    }

    let state = Locked(State())
    let videoQueue = DispatchQueue(label: "capturekit.harness.video")
    let audioQueue = DispatchQueue(label: "capturekit.harness.audio")
    let metadataQueue = DispatchQueue(label: "capturekit.harness.metadata")

    func settle() {
        videoQueue.sync {}
        audioQueue.sync {}
        metadataQueue.sync {}
    }

    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        let id = connection.input.device.uniqueID
        state.withLock { s in
            let pts = sample.presentationTime.seconds - s.origin
            let end = pts + sample.duration.seconds
            guard pts < s.cutoff else { return }
            s.delivered.frameSequence.append(sample.sequenceNumber)
            s.delivered.framePTS.append(pts)
            s.lastEnd[id] = end
            s.latestEnd = max(s.latestEnd, end)
            s.lastEndByMedia[.video] = end
        }
    }

    func dataOutput(_ output: VideoDataOutput, didDrop reason: DropReason, presentationTime: MediaTime, from connection: CaptureConnection) {
        state.withLock { $0.delivered.droppedByReason[reason.rawValue, default: 0] += 1 }
    }

    func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        let id = connection.input.device.uniqueID
        let frames = Int64(sample.audioBuffer?.frameLength ?? 0)
        let rate = sample.audioBuffer?.format.sampleRate ?? 0
        state.withLock { s in
            let pts = sample.presentationTime.seconds - s.origin
            let end = pts + sample.duration.seconds
            guard pts < s.cutoff else { return }
            s.delivered.audioFrames += frames
            if rate > 0 { s.delivered.audioSampleRate = rate }
            if let gap = sample.discontinuity { s.delivered.audioFramesLost += Int64(gap.count) }
            s.lastEnd[id] = end
            s.latestEnd = max(s.latestEnd, end)
            s.lastEndByMedia[.audio] = end
        }
    }

    func metadataOutput(_ output: MetadataOutput, didOutput objects: [MetadataObject], from connection: CaptureConnection) {
        state.withLock { s in
            for object in objects { s.delivered.metadataObjects[object.type.name, default: 0] += 1 }
        }
    }

    func record(_ event: SessionEvent) {
        switch event {
        case .runtimeError(let error):
            let device: String?
            switch error {
            case .deviceDisconnected(let id), .deviceNotFound(let id): device = id
            case .lockedByAnotherClient(let id, _), .deviceStartFailed(let id, _), .buffersNotReturned(let id, _, _): device = id
            default: device = nil
            }
            var media: MediaType?
            if case .notAuthorized(let type, _) = error { media = MediaType(rawValue: type) }
            let pts = state.withLock { s in device.flatMap { s.lastEnd[$0] } ?? media.flatMap { s.lastEndByMedia[$0] } ?? s.latestEnd }
            recordError(error, source: "session", pts: pts)
        case .interrupted(let reason):
            state.withLock { s in
                s.errors.append(.init(type: "interrupted", pts: s.latestEnd, message: "\(reason)", source: "session"))
            }
        case .interruptionEnded:
            state.withLock { s in
                s.errors.append(.init(type: "interruptionEnded", pts: s.latestEnd, message: "interruption ended", source: "session"))
            }
        case .stopped:
            state.withLock { $0.sawStopped = true }
        case .started, .streamEnded:
            break
        }
    }

    func recordError(_ error: CaptureError, source: String, pts: Double) {
        let entry = CaptureHarness.DeliveredError(type: CaptureHarness.typeName(error), pts: pts, message: error.description, source: source)
        state.withLock { $0.errors.append(entry) }
    }
}

/// The movie's recording delegate: keeps the summary and error, signals the end.
final class RecordingDelegate: CaptureFileOutputRecordingDelegate {
    private struct State {
        var summary: RecordingSummary?
        var error: CaptureError?
        var finished = false
    }

    private let state = Locked(State())
    /// Signalled at the finish: waits on it end on the event.
    private let finishSignal = DispatchSemaphore(value: 0)

    var isFinished: Bool { state.withLock { $0.finished } }
    var summary: RecordingSummary? { state.withLock { $0.summary } }
    var error: CaptureError? { state.withLock { $0.error } }

    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        let first = state.withLock { s -> Bool in
            s.summary = summary
            s.error = error
            defer { s.finished = true }
            return !s.finished
        }
        if first { finishSignal.signal() }
    }

    /// Suspends (holding no pool thread: the wait is on a thread of its own) until the recording
    /// finished; false on timeout.
    func wait(seconds: Double) async -> Bool { await offThePool { self.blockUntilFinished(seconds: seconds) } }

    /// Blocks (callers on their own threads only) until the recording finished; false on timeout.
    func blockUntilFinished(seconds: Double) -> Bool {
        guard finishSignal.wait(timeout: .now() + seconds) == .success else { return false }
        finishSignal.signal()  // for the next waiter
        return true
    }
}

/// Runs the harness's event consumer on one Dispatch queue (a task executor off the cooperative pool).
final class EventExecutor: TaskExecutor {
    static let shared = EventExecutor()
    private let queue = DispatchQueue(label: "capturekit.harness.events")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
