import CaptureCore
import CaptureMedia
import Dispatch
import Foundation
import Synchronization

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
}

/// Records a session's video and audio to an MP4 or MOV file (AVCaptureMovieFileOutput):
/// H.264 through libx264 and AAC, muxed by libavformat.
///
/// Recording starts on the first video frame after the request (so the file starts with a
/// keyframe); audio is cut sample-accurately to that frame's PTS.
public final class MovieFileOutput: CaptureOutput {
    /// Encoding choices for the files this output writes.
    public struct Settings: Sendable, Hashable {
        public var preset: VideoEncoderSettings.Preset = .veryfast
        /// Average video bitrate (bits/s); nil = constant quality.
        public var videoBitrate: Int?
        /// nil = a keyframe every 2 s.
        public var keyframeInterval: Int?
        public var audioBitrate: Int?
        public init() {}
    }

    public let attachment = OutputAttachment()
    private let delegateQueue = DispatchQueue(label: "CaptureKit.MovieFileOutput.delegate")
    private let state = Mutex(State())

    private struct Request {
        let path: String
        let delegate: any CaptureFileOutputRecordingDelegate
        let connections: [CaptureConnection]
    }

    private struct Active {
        let request: Request
        let writer: MovieWriter
        let startTime: MediaTime
        let frameDuration: MediaTime
        let hasVideo: Bool
        let hasAudio: Bool
        var audioSamples: Int64 = 0
        var lastVideoEnd: MediaTime
    }

    private enum Phase {
        case idle
        case waiting(Request)
        case recording(Active)
    }

    private struct State {
        var phase = Phase.idle
        /// Audio that arrived while waiting for the first video frame; the part at or after that
        /// frame's PTS is written once recording begins (real-time audio often arrives first).
        var audioBacklog: [SampleBuffer] = []
        var settings = Settings()
        var maxRecordedDuration = MediaTime.invalid
    }

    public init() {}

    public func accepts(_ mediaType: MediaType) -> Bool { true }

    public var settings: Settings {
        get { state.withLock { $0.settings } }
        set { state.withLock { $0.settings = newValue } }
    }

    /// Stops a recording on its own after this much media (invalid = no limit).
    public var maxRecordedDuration: MediaTime {
        get { state.withLock { $0.maxRecordedDuration } }
        set { state.withLock { $0.maxRecordedDuration = newValue } }
    }

    public var isRecording: Bool {
        state.withLock { if case .idle = $0.phase { return false } else { return true } }
    }

    /// Media written so far in the current recording.
    public var recordedDuration: MediaTime {
        state.withLock { s in
            guard case .recording(let a) = s.phase else { return .zero }
            return a.hasVideo ? a.lastVideoEnd - a.startTime
                : MediaTime(value: a.audioSamples, timescale: Int32(a.writer.audioSamplesWritten > 0 ? sampleRate(a) : 1))
        }
    }

    /// Bytes written so far in the current recording.
    public var recordedFileSize: Int64 {
        state.withLock { s in
            guard case .recording(let a) = s.phase else { return 0 }
            return a.writer.bytesWritten
        }
    }

    /// Encoding happens as samples arrive, so a recording output is never busy.
    public var demand: OutputDemand { isRecording ? .ready : .idle }

    // MARK: Starting and stopping

    /// Starts recording to `path`; the outcome always reaches `delegate.didFinishRecording` exactly once.
    public func startRecording(to path: String, recordingDelegate delegate: any CaptureFileOutputRecordingDelegate) {
        let connections = attachment.connections.filter(\.isActive)
        let request = Request(path: path, delegate: delegate, connections: connections)
        if let error = validate(path: path, connections: connections) {
            finish(request, summary: RecordingSummary(path: path, videoFrames: 0, audioSamples: 0, duration: 0, fileSize: 0), error: error)
            return
        }
        let accepted = state.withLock { s -> Bool in
            guard case .idle = s.phase else { return false }
            s.phase = .waiting(request)
            s.audioBacklog = []
            return true
        }
        guard accepted else {
            finish(request, summary: RecordingSummary(path: path, videoFrames: 0, audioSamples: 0, duration: 0, fileSize: 0),
                   error: .alreadyRecording)
            return
        }
        attachment.demandChanged()
    }

    /// Finishes the current recording; the file is complete when the delegate hears of it.
    public func stopRecording() {
        end(error: nil, waitingError: .noDataRecorded)
    }

    public func sessionDidStop() {
        end(error: nil, waitingError: .sessionNotRunning)
    }

    /// The async alternative: records to `path` until `stopRecording`, a limit or the session stops,
    /// and returns what was written. A limit is a normal end here; other failures throw.
    public func record(to path: String) async throws(CaptureError) -> RecordingSummary {
        let result: Result<RecordingSummary, CaptureError> = await withCheckedContinuation { continuation in
            startRecording(to: path, recordingDelegate: ContinuationDelegate(continuation))
        }
        return try result.get()
    }

    private func validate(path: String, connections: [CaptureConnection]) -> CaptureError? {
        guard !connections.isEmpty else { return .noInputs }
        guard attachment.isSessionRunning else { return .sessionNotRunning }
        guard MovieContainer(pathExtension: (path as NSString).pathExtension) != nil else {
            return .invalidArgument("\(path): the file name must end in .mp4 or .mov")
        }
        let folder = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !folder.isEmpty, !(FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory) && isDirectory.boolValue) {
            return .outputDirectoryMissing(path: path)
        }
        if FileManager.default.fileExists(atPath: path) { return .outputFileExists(path: path) }
        return nil
    }

    // MARK: Samples

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let outcome: Outcome? = state.withLock { s -> Outcome? in
            switch s.phase {
            case .idle:
                return nil
            case .waiting(let request):
                let hasVideo = request.connections.contains { $0.mediaType == .video }
                // Start on a video frame when there is video, so the file opens on a keyframe.
                guard sample.mediaType == .video || !hasVideo else {
                    s.audioBacklog.append(sample)
                    // Keep about half a second: enough to cover any buffer spanning the start.
                    let horizon = sample.presentationTime - MediaTime(value: 1, timescale: 2)
                    s.audioBacklog.removeAll { $0.presentationTime + $0.duration < horizon }
                    return nil
                }
                let backlog = s.audioBacklog
                s.audioBacklog = []
                do throws(CaptureError) {
                    let active = try begin(request, with: sample, settings: s.settings)
                    s.phase = .recording(active)
                } catch {
                    s.phase = .idle
                    return .failed(request, error)
                }
                guard case .recording(var active) = s.phase else { return nil }
                var result = write(sample, into: &active, limit: s.maxRecordedDuration)
                for audio in backlog {
                    guard result == nil else { break }
                    result = write(audio, into: &active, limit: s.maxRecordedDuration)
                }
                s.phase = .recording(active)
                return .started(request, then: result)
            case .recording(var active):
                let result = write(sample, into: &active, limit: s.maxRecordedDuration)
                s.phase = .recording(active)
                return result
            }
        }
        handle(outcome)
    }

    private indirect enum Outcome {
        case started(Request, then: Outcome?)
        case failed(Request, CaptureError)
        case stop(CaptureError?)
    }

    private func handle(_ outcome: Outcome?) {
        switch outcome {
        case nil: return
        case .started(let request, let then):
            delegateQueue.async { request.delegate.fileOutput(self, didStartRecordingTo: request.path, from: request.connections) }
            handle(then)
        case .failed(let request, let error):
            finish(request, summary: RecordingSummary(path: request.path, videoFrames: 0, audioSamples: 0, duration: 0, fileSize: 0), error: error)
            attachment.demandChanged()
        case .stop(let error):
            end(error: error, waitingError: .noDataRecorded)
        }
    }

    private func begin(_ request: Request, with sample: SampleBuffer, settings: Settings) throws(CaptureError) -> Active {
        let container = MovieContainer(pathExtension: (request.path as NSString).pathExtension) ?? .mp4
        var videoSettings: VideoEncoderSettings?
        var frameDuration = MediaTime.invalid
        if let video = request.connections.first(where: { $0.mediaType == .video }),
           case .video(let pixelFormat, let dimensions) = video.formatDescription {
            frameDuration = video.videoFrameDuration
            videoSettings = VideoEncoderSettings(dimensions: dimensions, inputPixelFormat: pixelFormat, frameDuration: frameDuration,
                                                 preset: settings.preset, bitrate: settings.videoBitrate,
                                                 keyframeInterval: settings.keyframeInterval)
        }
        var audioSettings: AudioEncoderSettings?
        if let audio = request.connections.first(where: { $0.mediaType == .audio }),
           case .audio(let format) = audio.formatDescription {
            audioSettings = AudioEncoderSettings(input: format, bitrate: settings.audioBitrate)
        }
        let writer = try MovieWriter(path: request.path, container: container, video: videoSettings, audio: audioSettings)
        return Active(request: request, writer: writer, startTime: sample.presentationTime, frameDuration: frameDuration,
                      hasVideo: videoSettings != nil, hasAudio: audioSettings != nil, lastVideoEnd: sample.presentationTime)
    }

    /// Writes one sample; returns `.stop` when a limit is reached or writing failed.
    private func write(_ sample: SampleBuffer, into active: inout Active, limit: MediaTime) -> Outcome? {
        let end = limit.isNumeric ? active.startTime + limit : MediaTime.positiveInfinity
        do throws(CaptureError) {
            switch sample.payload {
            case .pixels(let buffer):
                guard active.hasVideo else { return nil }
                if sample.presentationTime >= end { return .stop(.recordingLimitReached(.maximumDuration)) }
                let offset = sample.presentationTime - active.startTime
                let ticks = Int64((offset.seconds / active.frameDuration.seconds).rounded())
                try active.writer.appendVideo(buffer, frameIndex: ticks)
                active.lastVideoEnd = sample.presentationTime + sample.duration
            case .audio(let buffer):
                guard active.hasAudio else { return nil }
                let rate = Int32(buffer.format.sampleRate)
                // Audio is one continuous run from the start: overlap is cut, gaps become silence,
                // so every sample lands at its own PTS relative to the first video frame.
                let expected = active.startTime + MediaTime(value: active.audioSamples, timescale: rate)
                let gap = Int(((sample.presentationTime - expected).seconds * Double(rate)).rounded())
                let limitSamples = end.isNumeric ? Int(((end - expected).seconds * Double(rate)).rounded()) : Int.max
                if gap > 0 {
                    let silence = AudioPCMBuffer(format: buffer.format, frameCapacity: min(gap, max(0, limitSamples)))
                    if silence.frameLength > 0 {
                        try active.writer.appendAudio(silence)
                        active.audioSamples += Int64(silence.frameLength)
                    }
                }
                let from = max(expected, active.startTime)
                if let trimmed = trim(buffer, at: sample.presentationTime, from: from, to: end) {
                    try active.writer.appendAudio(trimmed)
                    active.audioSamples += Int64(trimmed.frameLength)
                }
                if !active.hasVideo && sample.presentationTime + sample.duration >= end {
                    return .stop(.recordingLimitReached(.maximumDuration))
                }
            }
        } catch {
            return .stop(error)
        }
        return nil
    }

    /// The part of an audio buffer inside [start, end), sample-accurately; nil when none is.
    private func trim(_ buffer: AudioPCMBuffer, at pts: MediaTime, from start: MediaTime, to end: MediaTime) -> AudioPCMBuffer? {
        let rate = buffer.format.sampleRate
        let count = buffer.frameLength
        func samples(_ t: MediaTime) -> Int {
            Int(((t - pts).seconds * Double(rate)).rounded())
        }
        let first = max(0, samples(start))
        let last = end.isNumeric ? min(count, samples(end)) : count
        if first == 0 && last == count { return buffer }
        guard last > first else { return nil }
        let out = AudioPCMBuffer(format: buffer.format, frameCapacity: last - first)
        let bytesPerFrame = buffer.format.bytesPerFrame
        buffer.withBytes { src in
            out.withMutableBytes { dst in
                dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[(first * bytesPerFrame)..<(last * bytesPerFrame)]))
            }
        }
        return out
    }

    private func sampleRate(_ active: Active) -> Int {
        if let audio = active.request.connections.first(where: { $0.mediaType == .audio }),
           case .audio(let f) = audio.formatDescription { return f.sampleRate }
        return 1
    }

    /// Ends whatever is in progress: finalizes an active file, or fails a waiting request.
    private func end(error: CaptureError?, waitingError: CaptureError) {
        let phase = state.withLock { s -> Phase in
            defer {
                s.phase = .idle
                s.audioBacklog = []
            }
            return s.phase
        }
        switch phase {
        case .idle:
            return
        case .waiting(let request):
            finish(request, summary: RecordingSummary(path: request.path, videoFrames: 0, audioSamples: 0, duration: 0, fileSize: 0),
                   error: waitingError)
        case .recording(let active):
            var failure = error
            do throws(CaptureError) {
                try active.writer.finish()
            } catch let finishError {
                failure = failure ?? finishError
            }
            let size = (try? FileManager.default.attributesOfItem(atPath: active.request.path)[.size] as? Int64) ?? 0
            let duration = active.hasVideo ? (active.lastVideoEnd - active.startTime).seconds
                : Double(active.audioSamples) / Double(sampleRate(active))
            let summary = RecordingSummary(path: active.request.path, videoFrames: active.writer.videoFramesWritten,
                                           audioSamples: active.audioSamples, duration: duration, fileSize: size,
                                           startTime: active.startTime.seconds)
            finish(active.request, summary: summary, error: failure)
        }
        attachment.demandChanged()
    }

    private func finish(_ request: Request, summary: RecordingSummary, error: CaptureError?) {
        delegateQueue.async {
            request.delegate.fileOutput(self, didFinishRecordingTo: request.path, from: request.connections,
                                        summary: summary, error: error)
        }
    }
}

/// Bridges the delegate callbacks to `record(to:)`'s continuation.
private final class ContinuationDelegate: CaptureFileOutputRecordingDelegate {
    private let continuation: Mutex<CheckedContinuation<Result<RecordingSummary, CaptureError>, Never>?>

    init(_ continuation: CheckedContinuation<Result<RecordingSummary, CaptureError>, Never>) {
        self.continuation = Mutex(continuation)
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
