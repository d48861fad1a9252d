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
            Self.checkResult(of: active.writer, summary: &summary, failure: &failure)
            finish(active.request, summary: summary, error: failure)
        }
        return true
    }

    /// What finishing left at the path, told truthfully: a defragmentation that failed (the file
    /// keeps its fragments and plays), a path that no longer names the file written (not usable,
    /// nothing reported of it), and a file with no media in it — not usable, removed (only when the
    /// path still names the file written) and reported as `noDataRecorded`, as AVFoundation reports
    /// a recording that captured nothing; a file without streams plays nowhere, so it is not kept.
    static func checkResult(of writer: MovieWriter, summary: inout RecordingSummary, failure: inout CaptureError?) {
        let path = summary.path
        if let problem = writer.defragmentationFailure { summary.defragmentationError = "\(problem)" }
        if let identity = writer.fileIdentity, FileIdentity(path: path) != identity {
            summary.fileIsUsable = false
            summary.fileSize = 0
            if summary.defragmentationError == nil {
                summary.defragmentationError = "\(MovieDefragmenter.replaced(path))"
            }
            return
        }
        guard summary.videoFrames == 0, summary.audioSamples == 0, failure.map({ !$0.isWriteFailure }) ?? true else { return }
        summary.fileIsUsable = false
        summary.defragmentationError = nil
        if let identity = writer.fileIdentity, identity.unlink(path) { summary.fileSize = 0 }
        if failure == nil || failure?.recordingFinishedSuccessfully == true { failure = .noDataRecorded }
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
