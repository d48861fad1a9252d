// How a recording ends, exactly once: the phase goes back to idle, the `MovieWriter` finishes the
// file (closing its last fragment and defragmenting it), and the delegate hears what the file holds.
import CaptureCore
import CaptureMedia
import Dispatch
import Foundation

extension MovieFileOutput {
    /// Ends whatever is in progress: finalizes an active file, or fails a waiting request.
    func end(error: CaptureError?, reason: String, waitingError: CaptureError) {
        let ended = writing.withLock { w in end(&w, error: error, reason: reason, waitingError: waitingError) }
        if ended { attachment.demandChanged() }
    }

    /// `end` with `writing` held; returns whether something ended. Whoever swaps the phase to
    /// `idle` reports the request, so every request finishes exactly once.
    func end(_ w: inout Writing, error: CaptureError?, reason: String, waitingError: CaptureError) -> Bool {
        let phase = state.withLock { s -> Phase in
            defer {
                s.phase = .idle
                s.isPaused = false
                s.resumeRequested = false
                s.progress = (.zero, 0)
            }
            return s.phase
        }
        let open = w.active
        w = Writing()
        switch phase {
        case .idle:
            return false
        case .waiting(let request):
            finish(request, summary: .empty(request.path, reason: reason), error: waitingError)
        case .recording(let request):
            guard let active = open else {
                // Cannot happen: `active` is set in the same `writing` section that enters `.recording`.
                finish(request, summary: .empty(request.path, reason: reason), error: error ?? .invalidState("no open file"))
                return true
            }
            var failure = error
            var usable = true
            var reason = reason
            do throws(CaptureError) {
                try active.writer.finish()
            } catch let finishError {
                // A refused write comes back from finish with what the file kept.
                failure = finishError.isWriteFailure ? finishError : failure ?? finishError
                usable = false
            }
            let size = (try? FileManager.default.attributesOfItem(atPath: active.request.path)[.size] as? Int64) ?? 0
            let timeline = active.timeline
            var duration = timeline.duration.seconds
            var videoFrames = active.writer.videoFramesWritten
            var audioSamples = timeline.audioSamples
            if let failure, failure.isWriteFailure {
                // The file holds its complete fragments only: count what they hold.
                let kept = active.writer.completePart
                reason = Self.stopReason(for: failure)
                usable = kept.seconds > 0
                duration = kept.seconds
                videoFrames = kept.videoFrames
                audioSamples = min(audioSamples, Int64((kept.seconds * Double(timeline.audioRate ?? 1)).rounded()))
            }
            var summary = RecordingSummary(path: active.request.path, videoFrames: videoFrames,
                                           audioSamples: audioSamples, duration: duration, fileSize: size,
                                           startTime: timeline.origin.seconds)
            summary.stopReason = reason
            summary.fileIsUsable = usable
            summary.pausedDuration = timeline.pausedDuration.seconds
            summary.videoCodec = active.videoCodec
            summary.videoPassthrough = active.passthrough
            summary.invalidFramesSkipped = active.invalidFrames
            summary.invalidFrameProblem = active.invalidFrameProblem
            summary.fragmentsWritten = active.writer.fragmentsWritten
            summary.videoEncoderLatencyFrames = active.writer.videoEncoderLatencyFrames
            (summary.videoFramesSkipped, summary.videoFramesDroppedLate) = shedding.withLock { $0 }
            finish(active.request, summary: summary, error: failure)
        }
        return true
    }

    /// `RecordingSummary.stopReason` for a failure: `diskFull`, `writeFailed` or `error`.
    static func stopReason(for error: CaptureError) -> String {
        switch error {
        case .diskFull: return "diskFull"
        case .writeFailed: return "writeFailed"
        default: return "error"
        }
    }

    func finish(_ request: Request, summary: RecordingSummary, error: CaptureError?) {
        delegateQueue.async {
            request.delegate.fileOutput(self, didFinishRecordingTo: request.path, from: request.connections,
                                        summary: summary, error: error)
        }
    }
}
