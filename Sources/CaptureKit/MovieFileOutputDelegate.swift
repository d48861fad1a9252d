// The movie output's report to the app: the recording delegate, the summary of a finished
// recording, and the bridge from the delegate to `record(to:)`.
import CaptureCore

/// Receives the life cycle of a recording (AVCaptureFileOutputRecordingDelegate).
/// Callbacks arrive on the output's delegate queue, never on a capture thread.
public protocol CaptureFileOutputRecordingDelegate: AnyObject, Sendable {
    /// Writing began with the first sample. May not fire (e.g. the request failed at once).
    func fileOutput(_ output: MovieFileOutput, didStartRecordingTo path: String, from connections: [CaptureConnection])
    /// Fires exactly once per `startRecording` request. `error` is nil on a normal stop; for
    /// `.recordingLimitReached` the file is still complete (`error.recordingFinishedSuccessfully`).
    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?)
}

extension CaptureFileOutputRecordingDelegate {
    public func fileOutput(_ output: MovieFileOutput, didStartRecordingTo path: String, from connections: [CaptureConnection]) {}
}

/// What a finished recording holds.
public struct RecordingSummary: Sendable, Codable, Equatable {
    public var path: String
    public var videoFrames: Int
    public var audioSamples: Int64
    /// Seconds of media: video frames × frame duration, or audio samples / rate for audio-only files.
    public var duration: Double
    public var fileSize: Int64
    /// PTS (session clock) of the first recorded sample.
    public var startTime: Double?
    /// Why it ended: requested, sessionStopped, maximumDuration, maximumFileSize, diskFull (the
    /// `minFreeDiskSpaceLimit`, or the disk really filled up: then the error is `.diskFull`),
    /// writeFailed, configurationChanged (the camera's size or pixel format changed while recording:
    /// the error is `.sessionConfigurationChanged`, the file complete), error.
    public var stopReason: String = "requested"
    /// True when the file was finalized and plays (always, unless nothing could be written).
    public var fileIsUsable: Bool = false
    /// Media seconds cut out by pauses.
    public var pausedDuration: Double = 0
    /// The video track's codec as written (`h264`, `mjpeg`, `hevc`); nil without video.
    public var videoCodec: String?
    /// True when the camera's compressed frames were copied into the file (no decode, no encode).
    public var videoPassthrough: Bool = false
    /// Damaged camera frames left out: MJPEG frames that were not whole JPEGs (copied or encoded)
    /// or, when encoding, did not decode cleanly. The recording goes on without them.
    public var invalidFramesSkipped: Int = 0
    /// Why the first such frame was left out.
    public var invalidFrameProblem: String?
    /// Fragments written while recording (0 without `movieFragmentInterval`); a finished
    /// MP4/MOV is then defragmented into a regular movie, as AVFoundation's are.
    public var fragmentsWritten: Int = 0
    /// How many frames after a frame went into the video encoder its packet came out, at most:
    /// a killed recording can lose this many frames beyond the last fragment interval.
    public var videoEncoderLatencyFrames: Int = 0
    /// Video frames left out by `MovieFileOutput.videoFrameInterval` (a rate the encoder could not keep).
    public var videoFramesSkipped: Int = 0
    /// Real-time video frames dropped because `maximumEncoderQueueBytes` of frames were already
    /// waiting for the encoder.
    public var videoFramesDroppedLate: Int = 0
    /// nil when a fragmented MP4/MOV was defragmented (or needed no defragmenting); otherwise why it
    /// was not — no room on the disk for the copy, or the path no longer names this recording. The
    /// file then keeps its fragments: it is complete and plays, but FFmpeg-based readers show the
    /// audio's AAC priming (a start at −21 ms). `capture record` exits 3 then.
    public var defragmentationError: String?

    static func empty(_ path: String, reason: String) -> RecordingSummary {
        RecordingSummary(path: path, videoFrames: 0, audioSamples: 0, duration: 0, fileSize: 0, stopReason: reason)
    }
}

/// Bridges the delegate callbacks to `record(to:)`'s continuation.
final class ContinuationDelegate: CaptureFileOutputRecordingDelegate {
    private let continuation: Locked<CheckedContinuation<Result<RecordingSummary, CaptureError>, Never>?>
    private let onStart: (@Sendable () -> Void)?

    init(_ continuation: CheckedContinuation<Result<RecordingSummary, CaptureError>, Never>, onStart: (@Sendable () -> Void)?) {
        self.continuation = Locked(continuation)
        self.onStart = onStart
    }

    func fileOutput(_ output: MovieFileOutput, didStartRecordingTo path: String, from connections: [CaptureConnection]) {
        onStart?()
    }

    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        let c = continuation.withLock { c in
            defer { c = nil }
            return c
        }
        if let error, !error.recordingFinishedSuccessfully {
            c?.resume(returning: .failure(error))
        } else {
            c?.resume(returning: .success(summary))
        }
    }
}
