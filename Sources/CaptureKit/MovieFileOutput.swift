// Over 500 lines, on purpose: one AVCaptureMovieFileOutput — requests, the writer's timeline (start,
// pause, audio gaps and trims), limits and the exactly-once finish — shares two private locks
// (`state`, `writing`) whose order every part must keep; the next step is a pure RecordingTimeline
// shared with the asset writer (issue 20), which would take the timeline half out.
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
    /// Why it ended: requested, sessionStopped, maximumDuration, maximumFileSize, diskFull (the
    /// `minFreeDiskSpaceLimit`, or the disk really filled up: then the error is `.diskFull`),
    /// writeFailed, error.
    public var stopReason: String = "requested"
    /// True when the file was finalized and plays (always, unless nothing could be written).
    public var fileIsUsable: Bool = false
    /// Media seconds cut out by pauses.
    public var pausedDuration: Double = 0
    /// The video track's codec as written (`h264`, `mjpeg`, `hevc`); nil without video.
    public var videoCodec: String?
    /// True when the camera's compressed frames were copied into the file (no decode, no encode).
    public var videoPassthrough: Bool = false
    /// Pass-through frames left out because they were not whole JPEGs (damaged or truncated).
    public var invalidFramesSkipped: Int = 0
    /// Why the first such frame was left out.
    public var invalidFrameProblem: String?
    /// Fragments written while recording (0 without `movieFragmentInterval`); a finished
    /// MP4/MOV is then defragmented into a regular movie, as AVFoundation's are.
    public var fragmentsWritten: Int = 0
    /// How many frames after a frame went into the video encoder its packet came out, at most:
    /// a killed recording can lose this many frames beyond the last fragment interval.
    public var videoEncoderLatencyFrames: Int = 0

    static func empty(_ path: String, reason: String) -> RecordingSummary {
        RecordingSummary(path: path, videoFrames: 0, audioSamples: 0, duration: 0, fileSize: 0, stopReason: reason)
    }
}

/// Records a session's video and audio to an MP4, MOV or MKV file (AVCaptureMovieFileOutput):
/// H.264 (libx264), MJPEG or HEVC and AAC, muxed by libavformat — or, from an MJPEG camera, the
/// camera's own JPEG frames copied into the file untouched (`VideoMode.passthrough`).
///
/// - Recording starts on the first video frame after the request (so the file starts with a
///   keyframe); audio is cut sample-accurately to that frame's PTS, gaps become silence.
/// - Limits stop a recording with a typed reason and a complete file: `maxRecordedDuration`,
///   `maxRecordedFileSize`, `minFreeDiskSpaceLimit` (checked on every frame through
///   `freeDiskSpace`, which tests can replace).
/// - `movieFragmentInterval` (default 10 s, as AVFoundation; invalid or zero disables) writes
///   the movie as fragments, so a crash leaves a playable file missing at most one interval.
/// - Pausing cuts the paused span out of the file; timestamps stay continuous.
/// - The video connection's rotation and mirroring go into the track's display matrix (MOV/MP4;
///   MKV refuses them). When frames are copied that is the only way to rotate: pixels cannot be
///   turned without decoding.
/// - Pass-through frames are queued and muxed by reference (no copy of the JPEG bytes) unless the
///   writer queue backs up, when only the frame's valid bytes are copied to free the device's buffer.
///   A frame that is not a whole JPEG is left out and counted (`invalidFramesSkipped`).
public final class MovieFileOutput: CaptureOutput {
    /// How the video track is made from the camera's frames.
    public enum VideoMode: Sendable, Hashable {
        /// Copy when the camera delivers MJPEG and the file is MOV or MKV; otherwise encode H.264.
        case automatic
        /// Encode with this codec (an MJPEG camera's frames are decoded first).
        case encode(VideoCodec)
        /// Copy the camera's compressed (MJPEG) frames into the file as they are: no decode, no
        /// encode, every frame a keyframe. Raw frames or an MP4 file fail with `passthroughUnavailable`.
        case passthrough
    }

    /// Encoding choices for the files this output writes.
    public struct Settings: Sendable, Hashable {
        /// How the video track is made (default: automatic — copy MJPEG into MOV/MKV, else H.264).
        public var videoMode: VideoMode = .automatic
        /// The encoder when frames are encoded (H.264 unless chosen); setting it selects `.encode(codec)`.
        public var codec: VideoCodec {
            get { if case .encode(let codec) = videoMode { return codec } else { return .h264 } }
            set { videoMode = .encode(newValue) }
        }
        public var preset: VideoEncoderSettings.Preset = .veryfast
        /// Average video bitrate (bits/s); nil = constant quality.
        public var videoBitrate: Int?
        /// nil = a keyframe every 2 s.
        public var keyframeInterval: Int?
        public var audioBitrate: Int?
        public init() {}

        /// What `videoMode` does with frames of `sourceFormat` written to `container`: `.passthrough`
        /// or `.encode(codec)`, never `.automatic`.
        public func resolvedVideoMode(sourceFormat: PixelFormat, container: MovieContainer) -> VideoMode {
            switch videoMode {
            case .automatic:
                return sourceFormat == .mjpeg && container != .mp4 ? .passthrough : .encode(.h264)
            case .encode, .passthrough:
                return videoMode
            }
        }
    }

    public let attachment = OutputAttachment()
    private let delegateQueue = DispatchQueue(label: "CaptureKit.MovieFileOutput.delegate")
    /// Real-time pace: samples are encoded here, off the device's thread, so a slow encoder
    /// queues frames (in memory) instead of making the device drop them. Virtual pace encodes on
    /// the delivery thread: the session simply waits, and the result is deterministic.
    private let writerQueue = DispatchQueue(label: "CaptureKit.MovieFileOutput.writer")
    private let queueDepth = Mutex((current: 0, highWater: 0))
    /// What the app and the device thread see: the phase, pause requests, settings, limits and
    /// the progress published after each write. Held only for short decisions, never while
    /// encoding, so the real-time `receive` on the device's thread never waits for the encoder.
    private let state = Mutex(State())
    /// The file being written (the `MovieWriter` and its timeline). Taken only where samples are
    /// written: the writer queue in real time, the delivery thread in virtual pace, and `end` (which
    /// runs on the writer queue in real time). Lock order: `writing`, then `state`.
    private let writing = Mutex(Writing())
    private let encodeDelay = Mutex(Duration.zero)

    private struct Request {
        let path: String
        let delegate: any CaptureFileOutputRecordingDelegate
        let connections: [CaptureConnection]
    }

    private struct Active {
        let request: Request
        let writer: MovieWriter
        /// Where each sample goes in the file: from the first frame's PTS, with the paused spans
        /// cut out. Its video tick is 1/90000 s for common rates, so the camera's own timestamps,
        /// jitter included, go into the file rather than being snapped to the frame grid.
        var timeline: RecordingTimeline
        /// Video frames are copied (`appendCompressedVideo`), not encoded.
        let passthrough: Bool
        let videoCodec: String?
        var invalidFrames = 0
        var invalidFrameProblem: String?
        /// With video, the newest audio that arrived while paused (the timeline says which to
        /// hold): the buffer that straddles the resuming frame's PTS comes before that frame, and
        /// its part from that PTS on belongs in the file.
        var pausedAudio: [SampleBuffer] = []
    }

    private enum Phase {
        case idle
        case waiting(Request)
        case recording(Request)
    }

    /// Whether a sample passes a pause: written, written as the first after a resume, or left out.
    private enum PauseGate { case open, resume, closed }

    /// Owned by whoever writes samples (see `writing`).
    private struct Writing {
        /// The open file; set exactly while `State.phase` is `.recording`.
        var active: Active?
        /// Audio that arrived while waiting for the first video frame; the part at or after that
        /// frame's PTS is written once recording begins (real-time audio often arrives first).
        var audioBacklog: [SampleBuffer] = []
        /// Pass-through frames skipped as damaged while waiting for the first good one.
        var invalidBeforeStart: (count: Int, problem: String?) = (0, nil)
    }

    private struct State {
        var phase = Phase.idle
        var isPaused = false
        var resumeRequested = false
        /// Published by the writing side after each sample, for `recordedDuration`/`recordedFileSize`.
        var progress = (duration: MediaTime.zero, bytes: Int64(0))
        var settings = Settings()
        var connectionSettings: [ObjectIdentifier: Settings] = [:]
        var maxRecordedDuration = MediaTime.invalid
        var maxRecordedFileSize: Int64 = 0
        var minFreeDiskSpaceLimit: Int64 = 0
        var movieFragmentInterval = MediaTime(value: 10, timescale: 1)
        var keepsMovieFragments = false
        var freeDiskSpace: @Sendable (String) -> Int64? = MovieFileOutput.statfsFreeSpace
    }

    public init() {}

    public func accepts(_ mediaType: MediaType) -> Bool { true }

    // MARK: Settings

    public var settings: Settings {
        get { state.withLock { $0.settings } }
        set { state.withLock { $0.settings = newValue } }
    }

    /// Settings for one connection's track (AVFoundation's per-connection output settings);
    /// nil returns to the output's `settings`.
    public func setOutputSettings(_ settings: Settings?, for connection: CaptureConnection) {
        state.withLock { $0.connectionSettings[ObjectIdentifier(connection)] = settings }
    }

    public func outputSettings(for connection: CaptureConnection) -> Settings {
        state.withLock { $0.connectionSettings[ObjectIdentifier(connection)] ?? $0.settings }
    }

    /// Stops a recording on its own after this much media (invalid = no limit).
    public var maxRecordedDuration: MediaTime {
        get { state.withLock { $0.maxRecordedDuration } }
        set { state.withLock { $0.maxRecordedDuration = newValue } }
    }

    /// Stops a recording before the file exceeds this many bytes (0 = no limit).
    public var maxRecordedFileSize: Int64 {
        get { state.withLock { $0.maxRecordedFileSize } }
        set { state.withLock { $0.maxRecordedFileSize = max(0, newValue) } }
    }

    /// Stops a recording when the file's volume has less free space than this (0 = no limit).
    public var minFreeDiskSpaceLimit: Int64 {
        get { state.withLock { $0.minFreeDiskSpaceLimit } }
        set { state.withLock { $0.minFreeDiskSpaceLimit = max(0, newValue) } }
    }

    /// Fragment interval (default 10 s); `.invalid` or zero writes an unfragmented movie.
    public var movieFragmentInterval: MediaTime {
        get { state.withLock { $0.movieFragmentInterval } }
        set { state.withLock { $0.movieFragmentInterval = newValue } }
    }

    /// False (the default, as AVFoundation): a fragmented MP4/MOV becomes a regular movie when it
    /// finishes (`MovieDefragmenter`), so every reader hides the AAC priming. True keeps the fragments
    /// (fragmented MP4 for streaming or for tools that want `moof` boxes); FFmpeg-based readers then
    /// see the audio start at −21.3 ms.
    public var keepsMovieFragments: Bool {
        get { state.withLock { $0.keepsMovieFragments } }
        set { state.withLock { $0.keepsMovieFragments = newValue } }
    }

    /// How free space is measured for `minFreeDiskSpaceLimit` (default: statfs on the file's folder).
    public var freeDiskSpace: @Sendable (String) -> Int64? {
        get { state.withLock { $0.freeDiskSpace } }
        set { state.withLock { $0.freeDiskSpace = newValue } }
    }

    static let statfsFreeSpace: @Sendable (String) -> Int64? = { path in
        let folder = (path as NSString).deletingLastPathComponent
        guard let attributes = try? FileManager.default.attributesOfFileSystem(forPath: folder.isEmpty ? "." : folder),
              let free = attributes[.systemFreeSize] as? NSNumber else { return nil }
        return free.int64Value
    }

    // MARK: Status

    public var isRecording: Bool {
        state.withLock { if case .idle = $0.phase { return false } else { return true } }
    }

    public var isRecordingPaused: Bool {
        state.withLock { if case .recording = $0.phase { return $0.isPaused } else { return false } }
    }

    /// Media written so far in the current recording (as of the last sample written).
    public var recordedDuration: MediaTime {
        state.withLock { s in
            guard case .recording = s.phase else { return .zero }
            return s.progress.duration
        }
    }

    /// Bytes written so far in the current recording (as of the last sample written).
    public var recordedFileSize: Int64 {
        state.withLock { s in
            guard case .recording = s.phase else { return 0 }
            return s.progress.bytes
        }
    }

    /// Encoding happens as samples arrive, so a recording output is never busy.
    public var demand: OutputDemand { isRecording ? .ready : .idle }

    // MARK: Starting, pausing and stopping

    /// Starts recording to `path`; the outcome always reaches `delegate.didFinishRecording` exactly once.
    public func startRecording(to path: String, recordingDelegate delegate: any CaptureFileOutputRecordingDelegate) {
        let connections = attachment.connections.filter(\.isActive)
        let request = Request(path: path, delegate: delegate, connections: connections)
        if let error = validate(path: path, connections: connections) {
            finish(request, summary: .empty(path, reason: "error"), error: error)
            return
        }
        let accepted = state.withLock { s -> Bool in
            guard case .idle = s.phase else { return false }
            s.phase = .waiting(request)
            s.isPaused = false
            s.resumeRequested = false
            s.progress = (.zero, 0)
            return true
        }
        guard accepted else {
            finish(request, summary: .empty(path, reason: "error"), error: .alreadyRecording)
            return
        }
        attachment.demandChanged()
    }

    /// Finishes the current recording; the file is complete when the delegate hears of it.
    public func stopRecording() {
        onWriter { self.end(error: nil, reason: "requested", waitingError: .noDataRecorded) }
    }

    /// Samples waiting for the encoder now, and the most there ever were (real-time pace).
    public var encoderQueueDepth: (current: Int, highWater: Int) { queueDepth.withLock { $0 } }

    /// Runs `work` after every sample already handed to the writer (real time), or now (virtual).
    private func onWriter(_ work: @escaping @Sendable () -> Void) {
        if attachment.pace == .realtime { writerQueue.async(execute: work) } else { work() }
    }

    /// Stops writing; samples until `resumeRecording` are left out of the file.
    public func pauseRecording() {
        state.withLock { s in
            guard case .recording = s.phase else { return }
            s.isPaused = true
            s.resumeRequested = false
        }
    }

    /// Resumes with the next video frame (or audio buffer for audio-only files); the file's
    /// timestamps continue where they stopped.
    public func resumeRecording() {
        state.withLock { s in
            guard case .recording = s.phase, s.isPaused else { return }
            s.resumeRequested = true
        }
    }

    public func sessionDidStop() {
        onWriter { self.end(error: nil, reason: "sessionStopped", waitingError: .sessionNotRunning) }
    }

    /// The async alternative: records to `path` until `stopRecording`, a limit or the session stops,
    /// and returns what was written. A limit is a normal end here; other failures throw.
    /// `onStart` runs when the first sample is written (`didStartRecordingTo`), on the delegate queue.
    public func record(to path: String, onStart: (@Sendable () -> Void)? = nil) async throws(CaptureError) -> RecordingSummary {
        let result: Result<RecordingSummary, CaptureError> = await withCheckedContinuation { continuation in
            startRecording(to: path, recordingDelegate: ContinuationDelegate(continuation, onStart: onStart))
        }
        return try result.get()
    }

    private func validate(path: String, connections: [CaptureConnection]) -> CaptureError? {
        guard !connections.isEmpty else { return .noInputs }
        guard attachment.isSessionRunning else { return .sessionNotRunning }
        guard MovieContainer(pathExtension: (path as NSString).pathExtension) != nil else {
            return .invalidArgument("\(path): the file name must end in .mp4, .mov or .mkv")
        }
        do throws(CaptureError) { try OutputPath.checkNew(path) } catch { return error }
        return nil
    }

    // MARK: Samples

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        guard attachment.pace == .realtime else {
            process(sample, from: connection)
            return
        }
        guard isRecording else { return }
        let depth = queueDepth.withLock { d -> Int in
            d.current += 1
            d.highWater = max(d.highWater, d.current)
            return d.current
        }
        // While the encoder keeps up the device's own buffer is queued (no copy). Once frames
        // start to wait, each is copied into the output's own pool so the device gets its buffer
        // back at once: a slow encoder then costs memory, not dropped frames.
        let queued = depth > Self.zeroCopyQueueDepth ? overflowCopy(of: sample) : sample
        writerQueue.async {
            self.process(queued, from: connection)
            self.queueDepth.withLock { $0.current -= 1 }
        }
    }

    /// Frames that may wait in the writer queue still holding the device's buffer.
    static let zeroCopyQueueDepth = 2
    private let overflowPool = Mutex<PixelBufferPool?>(nil)

    private func overflowCopy(of sample: SampleBuffer) -> SampleBuffer {
        guard let pixels = sample.pixelBuffer, pixels.pool != nil else { return sample }
        let pool = overflowPool.withLock { p -> PixelBufferPool in
            if let existing = p, existing.format == pixels.format, existing.width == pixels.width, existing.height == pixels.height {
                return existing
            }
            let fresh = PixelBufferPool(format: pixels.format, width: pixels.width, height: pixels.height)
            p = fresh
            return fresh
        }
        guard let copy = pool.makeBuffer() else { return sample }
        if pixels.format.isCompressed {
            // Only the frame's valid bytes (a JPEG is a small part of the buffer's capacity).
            do throws(CaptureError) {
                try pixels.withCompressedData { (bytes) throws(CaptureError) in try copy.setCompressedData(bytes) }
            } catch {
                return sample
            }
        }
        for plane in 0..<pixels.planeCount {
            copy.baseAddress(ofPlane: plane).copyMemory(from: pixels.baseAddress(ofPlane: plane),
                                                        byteCount: pixels.bytesPerRow[plane] * pixels.planeRows[plane])
        }
        return SampleBuffer(payload: .pixels(copy), formatDescription: sample.formatDescription,
                            presentationTime: sample.presentationTime, duration: sample.duration,
                            sequenceNumber: sample.sequenceNumber, discontinuity: sample.discontinuity)
    }

    /// Test hook: an extra delay per recorded video frame where frames are encoded (the writer
    /// queue in real time), standing in for a slow encoder.
    @_spi(Testing) public var testingEncodeDelay: Duration {
        get { encodeDelay.withLock { $0 } }
        set { encodeDelay.withLock { $0 = newValue } }
    }

    /// Writes one sample where samples are written (see `writing`). `state` is locked only to read
    /// what to do and to publish progress, never while encoding or muxing.
    private func process(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let demandChanged = writing.withLock { w in
            handle(step(sample, &w), &w)
        }
        if demandChanged { attachment.demandChanged() }
    }

    private func step(_ sample: SampleBuffer, _ w: inout Writing) -> Outcome? {
        enum Plan {
            case ignore
            case wait(Request, State)
            case write(PauseGate, Limits)
        }
        let plan = state.withLock { s -> Plan in
            switch s.phase {
            case .idle:
                return .ignore
            case .waiting(let request):
                return .wait(request, s)
            case .recording:
                guard let active = w.active else { return .ignore }
                guard s.isPaused else { return .write(.open, Limits(s)) }
                // Resume on a video frame (on audio for audio-only files).
                guard s.resumeRequested && active.timeline.resumes(on: sample.mediaType) else { return .write(.closed, Limits(s)) }
                s.isPaused = false
                s.resumeRequested = false
                return .write(.resume, Limits(s))
            }
        }
        switch plan {
        case .ignore:
            return nil
        case .wait(let request, let s):
            let hasVideo = request.connections.contains { $0.mediaType == .video }
            // Start on a video frame when there is video, so the file opens on a keyframe.
            guard sample.mediaType == .video || !hasVideo else {
                w.audioBacklog.append(sample)
                // Keep about half a second: enough to cover any buffer spanning the start.
                let horizon = sample.presentationTime - MediaTime(value: 1, timescale: 2)
                w.audioBacklog.removeAll { $0.presentationTime + $0.duration < horizon }
                return nil
            }
            if let problem = invalidPassthroughFrame(sample, request: request, state: s) {
                // Copying, and this first frame is damaged: start with the next good one.
                w.invalidBeforeStart.count += 1
                w.invalidBeforeStart.problem = w.invalidBeforeStart.problem ?? problem
                return nil
            }
            let backlog = w.audioBacklog
            w.audioBacklog = []
            let limits = Limits(s)
            var active: Active
            do throws(CaptureError) {
                active = try begin(request, with: sample, state: s)
            } catch {
                w = Writing()
                state.withLock { $0.phase = .idle }
                return .failed(request, error)
            }
            active.invalidFrames = w.invalidBeforeStart.count
            active.invalidFrameProblem = w.invalidBeforeStart.problem
            w.invalidBeforeStart = (0, nil)
            state.withLock { $0.phase = .recording(request) }
            var result = write(sample, into: &active, gate: .open, limits: limits)
            for audio in backlog {
                guard result == nil else { break }
                result = write(audio, into: &active, gate: .open, limits: limits)
            }
            w.active = active
            publishProgress(of: active)
            return .started(request, then: result)
        case .write(let gate, let limits):
            guard var active = w.active else { return nil }
            w.active = nil  // keep the one reference (no copy of the struct's storage on write)
            if sample.mediaType == .video, gate != .closed {
                let delay = encodeDelay.withLock { $0 }
                if delay > .zero { Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18) }
            }
            let result = write(sample, into: &active, gate: gate, limits: limits)
            w.active = active
            publishProgress(of: active)
            return result
        }
    }

    private func publishProgress(of active: Active) {
        let progress = (active.timeline.duration, active.writer.bytesWritten)
        state.withLock { s in
            if case .recording = s.phase { s.progress = progress }
        }
    }

    private struct Limits {
        var duration: MediaTime
        var fileSize: Int64
        var minFreeSpace: Int64
        var freeSpace: @Sendable (String) -> Int64?

        init(_ s: State) {
            duration = s.maxRecordedDuration
            fileSize = s.maxRecordedFileSize
            minFreeSpace = s.minFreeDiskSpaceLimit
            freeSpace = s.freeDiskSpace
        }
    }

    private indirect enum Outcome {
        case started(Request, then: Outcome?)
        case failed(Request, CaptureError)
        case stop(CaptureError?, reason: String)
    }

    /// Reports an outcome; returns whether the output's demand changed (a recording ended).
    private func handle(_ outcome: Outcome?, _ w: inout Writing) -> Bool {
        switch outcome {
        case nil:
            return false
        case .started(let request, let then):
            delegateQueue.async { request.delegate.fileOutput(self, didStartRecordingTo: request.path, from: request.connections) }
            return handle(then, &w)
        case .failed(let request, let error):
            finish(request, summary: .empty(request.path, reason: "error"), error: error)
            return true
        case .stop(let error, let reason):
            return end(&w, error: error, reason: reason, waitingError: .noDataRecorded)
        }
    }

    /// Why a first video frame that would be copied is not a whole JPEG (nil: fine, or not copying).
    private func invalidPassthroughFrame(_ sample: SampleBuffer, request: Request, state s: State) -> String? {
        guard let pixels = sample.pixelBuffer, pixels.format.isCompressed,
              let video = request.connections.first(where: { $0.mediaType == .video }) else { return nil }
        let container = MovieContainer(pathExtension: (request.path as NSString).pathExtension) ?? .mp4
        let settings = s.connectionSettings[ObjectIdentifier(video)] ?? s.settings
        guard settings.resolvedVideoMode(sourceFormat: pixels.format, container: container) == .passthrough else { return nil }
        return pixels.withCompressedData { JPEGFrameCheck.inspect($0).problem }
    }

    private func begin(_ request: Request, with sample: SampleBuffer, state s: State) throws(CaptureError) -> Active {
        let container = MovieContainer(pathExtension: (request.path as NSString).pathExtension) ?? .mp4
        var videoSettings: VideoEncoderSettings?
        var passthroughSettings: VideoPassthroughSettings?
        var videoCodec: String?
        var frameDuration = MediaTime.invalid
        var options = MovieWriter.Options()
        let interval = s.movieFragmentInterval
        options.fragmentInterval = interval.isNumeric && interval > .zero ? interval : nil
        options.defragmentsOnFinish = !s.keepsMovieFragments
        // The first frame's own format: a device may deliver decoded frames for a compressed
        // format (an MJPEG camera gives I420), so the connection's format is not what arrives.
        if let video = request.connections.first(where: { $0.mediaType == .video }),
           case .video(let pixelFormat, let dimensions) = sample.formatDescription {
            let settings = s.connectionSettings[ObjectIdentifier(video)] ?? s.settings
            frameDuration = video.videoFrameDuration
            let mode = settings.resolvedVideoMode(sourceFormat: pixelFormat, container: container)
            if mode == .passthrough {
                guard pixelFormat.isCompressed else {
                    throw .passthroughUnavailable("\(video.input.device.uniqueID) delivers raw \(pixelFormat) frames, and only compressed (MJPEG) frames can be copied; choose the camera's MJPG format or encode (h264)")
                }
                passthroughSettings = VideoPassthroughSettings(format: pixelFormat, dimensions: dimensions, frameDuration: frameDuration,
                                                               timeBase: TrackTimeBase.fine(for: frameDuration))
                videoCodec = "mjpeg"
            } else {
                let codec = settings.codec
                // iFrame presets: every frame a keyframe (Apple's editing-friendly recording).
                let keyframes = attachment.sessionPreset.isIFrame ? 1 : settings.keyframeInterval
                videoSettings = VideoEncoderSettings(dimensions: dimensions, inputPixelFormat: pixelFormat, frameDuration: frameDuration,
                                                     preset: settings.preset, bitrate: settings.videoBitrate,
                                                     keyframeInterval: keyframes, codec: codec)
                videoSettings?.timeBase = TrackTimeBase.fine(for: frameDuration)
                videoCodec = codec.rawValue
            }
            options.rotation = video.videoRotationAngle
            options.mirrored = video.isVideoMirrored
        }
        var audioSettings: AudioEncoderSettings?
        var rate: Int32 = 1
        if let audio = request.connections.first(where: { $0.mediaType == .audio }),
           case .audio(let format) = audio.formatDescription {
            let settings = s.connectionSettings[ObjectIdentifier(audio)] ?? s.settings
            audioSettings = AudioEncoderSettings(input: format, bitrate: settings.audioBitrate)
            rate = Int32(format.sampleRate)
        }
        let writer = try MovieWriter(path: request.path, container: container, video: videoSettings,
                                     videoPassthrough: passthroughSettings, audio: audioSettings, options: options)
        let hasVideo = videoSettings != nil || passthroughSettings != nil
        let timeline = RecordingTimeline(origin: sample.presentationTime,
                                         videoTick: hasVideo ? TrackTimeBase.fine(for: frameDuration) : nil,
                                         audioRate: audioSettings != nil ? rate : nil)
        return Active(request: request, writer: writer, timeline: timeline,
                      passthrough: passthroughSettings != nil, videoCodec: videoCodec)
    }

    /// Writes one sample where the timeline puts it; returns `.stop` when a limit is reached or
    /// writing failed.
    private func write(_ sample: SampleBuffer, into active: inout Active, gate: PauseGate, limits: Limits) -> Outcome? {
        active.timeline.end = limits.duration
        switch gate {
        case .open: break
        case .closed: active.timeline.pause()
        case .resume:
            // The paused span, from where the file stopped to this sample, is cut (for audio too, to
            // the sample): the file continues seamlessly with this sample.
            active.timeline.resume(at: sample.presentationTime)
        }
        do throws(CaptureError) {
            switch sample.payload {
            case .pixels(let buffer):
                if gate == .resume {
                    // The held audio straddling this frame's PTS gives the file its samples from that PTS on.
                    let held = active.pausedAudio
                    active.pausedAudio = []
                    for audio in held {
                        if case .audio(let samples) = audio.payload { try writeAudio(audio, samples, into: &active) }
                    }
                }
                let slot: RecordingTimeline.VideoSlot
                switch active.timeline.placeVideo(at: sample.presentationTime) {
                case .write(let placed): slot = placed
                case .pastEnd: return .stop(.recordingLimitReached(.maximumDuration), reason: "maximumDuration")
                case .paused, .beforeStart, .noTrack: return nil
                }
                if active.passthrough {
                    do {
                        try active.writer.appendCompressedVideo(buffer, frameIndex: slot.tick)
                    } catch .invalidCompressedFrame(let problem) {
                        // A damaged frame (truncated on the bus, say) is left out and counted; the
                        // previous frame shows until the next good one, whose PTS is unchanged.
                        active.invalidFrames += 1
                        active.invalidFrameProblem = active.invalidFrameProblem ?? "frame at \(slot.fileTime.seconds) s: \(problem)"
                        return nil
                    }
                } else {
                    try active.writer.appendVideo(buffer, frameIndex: slot.tick)
                }
                active.timeline.didWriteVideo(slot, duration: sample.duration)
            case .audio(let buffer):
                guard active.timeline.hasAudio else { return nil }
                if gate == .closed {
                    // Paused: with video, audio runs on to the paused video's end (the last written
                    // frame's), sample-accurately; the newest buffers wait for the resuming frame.
                    let held = try writeAudio(sample, buffer, into: &active)
                    if held { active.pausedAudio = Array((active.pausedAudio + [sample]).suffix(4)) }
                    return nil
                }
                try writeAudio(sample, buffer, into: &active)
                if active.timeline.audioReachedEnd {
                    return .stop(.recordingLimitReached(.maximumDuration), reason: "maximumDuration")
                }
            }
        } catch {
            return .stop(error, reason: Self.stopReason(for: error))
        }
        return checkSizeAndSpace(active, limits)
    }

    /// Writes what the timeline takes of an audio buffer: audio is one continuous run from the
    /// file's start (overlap cut, gaps silent), so every sample lands at its own PTS relative to the
    /// first video frame. Returns whether the buffer is to be held for a resume.
    @discardableResult
    private func writeAudio(_ sample: SampleBuffer, _ buffer: AudioPCMBuffer, into active: inout Active) throws(CaptureError) -> Bool {
        let placement = active.timeline.placeAudio(at: sample.presentationTime, frameCount: buffer.frameLength)
        try active.writer.appendAudio(buffer, as: placement, counting: &active.timeline)
        return placement.holdForResume
    }

    /// The size and free-space limits, checked after every written sample.
    private func checkSizeAndSpace(_ active: Active, _ limits: Limits) -> Outcome? {
        if limits.fileSize > 0 {
            // Keep room for what finishing adds: the last packets and the index (~32 bytes a sample).
            let samples = Int64(active.writer.videoFramesWritten) + active.timeline.audioSamples / 1024
            let reserve = 4096 + samples * 32 + active.writer.bytesWritten / max(1, Int64(active.writer.videoFramesWritten) + 1)
            if active.writer.bytesWritten + reserve >= limits.fileSize {
                return .stop(.recordingLimitReached(.maximumFileSize), reason: "maximumFileSize")
            }
        }
        if limits.minFreeSpace > 0, let free = limits.freeSpace(active.request.path), free < limits.minFreeSpace {
            return .stop(.recordingLimitReached(.diskFull), reason: "diskFull")
        }
        return nil
    }

    /// Ends whatever is in progress: finalizes an active file, or fails a waiting request.
    private func end(error: CaptureError?, reason: String, waitingError: CaptureError) {
        let ended = writing.withLock { w in end(&w, error: error, reason: reason, waitingError: waitingError) }
        if ended { attachment.demandChanged() }
    }

    /// `end` with `writing` held; returns whether something ended. Whoever swaps the phase to
    /// `idle` reports the request, so every request finishes exactly once.
    private func end(_ w: inout Writing, error: CaptureError?, reason: String, waitingError: CaptureError) -> Bool {
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
            finish(active.request, summary: summary, error: failure)
        }
        return true
    }

    /// `RecordingSummary.stopReason` for a failure: `diskFull`, `writeFailed` or `error`.
    private static func stopReason(for error: CaptureError) -> String {
        switch error {
        case .diskFull: return "diskFull"
        case .writeFailed: return "writeFailed"
        default: return "error"
        }
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
    private let onStart: (@Sendable () -> Void)?

    init(_ continuation: CheckedContinuation<Result<RecordingSummary, CaptureError>, Never>, onStart: (@Sendable () -> Void)?) {
        self.continuation = Mutex(continuation)
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
