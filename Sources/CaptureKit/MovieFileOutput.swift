// The movie output's app-facing side: settings, limits, status, the request/pause state machine
// (`state`) and `receive`, which hands samples to the write side (MovieFileOutput+Writing.swift) on
// the writer queue in real time; how a recording ends is in MovieFileOutput+Finish.swift.
import CaptureCore
import CaptureMedia
import Dispatch
import Foundation

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
/// - When an MJPEG camera's frames are encoded, a frame that does not decode cleanly is left out
///   and counted the same way: one damaged camera frame never ends the recording.
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
    let delegateQueue = DispatchQueue(label: "CaptureKit.MovieFileOutput.delegate")
    /// Real-time pace: samples are encoded here, off the device's thread, so a slow encoder
    /// queues frames (in memory, up to `maximumEncoderQueueBytes`) instead of making the device
    /// drop them. Virtual pace encodes on the delivery thread: the session simply waits, and the
    /// result is deterministic.
    private let writerQueue = DispatchQueue(label: "CaptureKit.MovieFileOutput.writer")
    private let queueDepth = Locked(QueueDepth())
    struct QueueDepth {
        var current = 0, highWater = 0
        /// Bytes of the video frames waiting, held against `maximumEncoderQueueBytes`.
        var videoBytes = 0
    }
    /// Video frames the current recording left out on purpose: `videoFrameInterval`'s skips, and
    /// real-time frames dropped because the encoder queue was full.
    let shedding = Locked((skipped: 0, droppedLate: 0))
    /// What the app and the device thread see: the phase, pause requests, settings, limits and
    /// the progress published after each write. Held only for short decisions, never while
    /// encoding, so the real-time `receive` on the device's thread never waits for the encoder.
    let state = Locked(State())
    /// The file being written (the `MovieWriter` and its timeline). Taken only where samples are
    /// written: the writer queue in real time, the delivery thread in virtual pace, and `end` (which
    /// runs on the writer queue in real time). Lock order: `writing`, then `state`.
    let writing = Locked(Writing())
    let encodeDelay = Locked(Duration.zero)

    struct Request {
        let path: String
        let delegate: any CaptureFileOutputRecordingDelegate
        let connections: [CaptureConnection]
    }

    enum Phase {
        case idle
        case waiting(Request)
        case recording(Request)
    }

    struct State {
        var phase = Phase.idle
        var isPaused = false
        var resumeRequested = false
        /// Published by the writing side after each sample, for `recordedDuration`/`recordedFileSize`.
        var progress = (duration: MediaTime.zero, bytes: Int64(0))
        var settings = Settings()
        var connectionSettings: [ObjectIdentifier: Settings] = [:]
        var maxRecordedDuration = MediaTime.invalid
        var outputFaults = OutputFaults()
        var maxRecordedFileSize: Int64 = 0
        var minFreeDiskSpaceLimit: Int64 = 0
        var movieFragmentInterval = MediaTime(value: 10, timescale: 1)
        var keepsMovieFragments = false
        var freeDiskSpace: @Sendable (String) -> Int64? = MovieFileOutput.statfsFreeSpace
        var videoFrameInterval = 1
        /// `stopRecording` was called for the current recording (real time: the stop is queued).
        var stopRequested = false
        var maximumEncoderQueueBytes = 64 << 20  // see maximumEncoderQueueBytes
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

    /// Faults injected into the next recording's writing: a disk that fills at N bytes, a slow
    /// disk, a slow encoder. Left empty, a recording from simulated devices takes its scenario's
    /// (`SimulatorScenario.faults.outputFaults`) when it starts.
    public var outputFaults: OutputFaults {
        get { state.withLock { $0.outputFaults } }
        set { state.withLock { $0.outputFaults = newValue } }
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
            s.stopRequested = false
            s.isPaused = false
            s.resumeRequested = false
            s.progress = (.zero, 0)
            return true
        }
        if accepted {
            live.withLock { $0 = LiveStatistics() }
            shedding.withLock { $0 = (0, 0) }
        }
        guard accepted else {
            finish(request, summary: .empty(path, reason: "error"), error: .alreadyRecording)
            return
        }
        attachment.demandChanged()
    }

    /// Finishes the current recording; the file is complete when the delegate hears of it.
    public func stopRecording() {
        // Samples after this call are not part of the recording (none is queued, none counted).
        state.withLock { $0.stopRequested = true }
        onWriter { self.end(error: nil, reason: "requested", waitingError: .noDataRecorded) }
    }

    /// What has arrived in the current recording so far, before encoding (for a live status line).
    public struct LiveStatistics: Sendable, Equatable {
        /// Video frames handed to the output.
        public var videoFrames = 0
        /// Frames missing between them: gaps in the camera's sequence numbers.
        public var droppedVideoFrames = 0
        /// Presentation time (s) of the newest frame, and the end of the newest audio chunk.
        public var lastVideoTime: Double?
        public var lastAudioEnd: Double?
        /// Peak level (dBFS) of the newest audio chunk.
        public var audioPeakDBFS: Float?
        var lastSequence: Int64?
        public init() {}
    }

    public var liveStatistics: LiveStatistics { live.withLock { $0 } }
    private let live = Locked(LiveStatistics())

    private func noteLive(_ sample: SampleBuffer) {
        if sample.mediaType == .video {
            live.withLock { l in
                if let previous = l.lastSequence, sample.sequenceNumber > previous + 1 {
                    l.droppedVideoFrames += Int(sample.sequenceNumber - previous - 1)
                }
                l.lastSequence = sample.sequenceNumber
                l.videoFrames += 1
                l.lastVideoTime = sample.presentationTime.seconds
            }
        } else if let audio = sample.audioBuffer {
            let dB = AudioLevelMeter.dB(Double(audio.peakMagnitude))
            live.withLock { l in
                l.lastAudioEnd = (sample.presentationTime + sample.duration).seconds
                l.audioPeakDBFS = dB
            }
        }
    }

    /// Samples waiting for the encoder now, and the most there ever were (real-time pace).
    public var encoderQueueDepth: (current: Int, highWater: Int) { queueDepth.withLock { ($0.current, $0.highWater) } }

    /// Records one video frame in every `videoFrameInterval`: those whose sequence number is a
    /// multiple of it, so a 240 fps camera with 2 records 120 fps (as ffmpeg's `-r` or GStreamer's
    /// videorate would). The others are left out and counted in `RecordingSummary.videoFramesSkipped`.
    /// `capture record --frame-interval N` sets it. 1 (the default) records every frame; values
    /// below 1 count as 1.
    public var videoFrameInterval: Int {
        get { state.withLock { $0.videoFrameInterval } }
        set { state.withLock { $0.videoFrameInterval = max(1, newValue) } }
    }

    /// Real time: the most bytes of video frames that may wait for the encoder (default 64 MiB:
    /// about 21 frames of 1080p NV12, 5 of 4K, so peak memory stays bounded). At 4K, x264's first
    /// frames take 3–5 frame periods while the kernel zeroes its fresh memory; 48 MiB (3 frames)
    /// dropped 2 of them in most recordings, 64 MiB none (and peak RSS stayed 268 MB). A frame that would go past it is dropped and
    /// counted in `RecordingSummary.videoFramesDroppedLate`: an encoder that cannot keep up costs
    /// frames, reported, never memory without bound. At least one frame always fits.
    public var maximumEncoderQueueBytes: Int {
        get { state.withLock { $0.maximumEncoderQueueBytes } }
        set { state.withLock { $0.maximumEncoderQueueBytes = max(0, newValue) } }
    }

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
        // Cheap and lock-light: this runs on the delivery thread, ahead of every real-time sample.
        // (Computing the meter by converting each chunk to Float and taking the state lock here
        // made a debug build under the VM's emulated CPU lose a fifth of an ALSA recording.)
        noteLive(sample)
        // One look at the state for the frame interval, the stop and the queue bound.
        let gate = state.withLock { s -> (recording: Bool, interval: Int, limit: Int) in
            if case .idle = s.phase { return (false, s.videoFrameInterval, 0) }
            return (!s.stopRequested, s.videoFrameInterval, s.maximumEncoderQueueBytes)
        }
        if sample.mediaType == .video, gate.interval > 1, sample.sequenceNumber % Int64(gate.interval) != 0 {
            if gate.recording { shedding.withLock { $0.skipped += 1 } }
            return
        }
        guard attachment.pace == .realtime else {
            process(sample, from: connection)
            return
        }
        guard gate.recording else { return }
        let limit = gate.limit
        let bytes = sample.mediaType == .video ? (sample.pixelBuffer?.allocationSize ?? 0) : 0
        let admitted = queueDepth.withLock { d -> Int? in
            // The encoder is this far behind: drop the frame here rather than queue without bound.
            if bytes > 0, d.videoBytes > 0, d.videoBytes + bytes > limit { return nil }
            d.current += 1
            d.videoBytes += bytes
            d.highWater = max(d.highWater, d.current)
            return d.current
        }
        guard let depth = admitted else {
            shedding.withLock { $0.droppedLate += 1 }
            return
        }
        // While the encoder keeps up the device's own buffer is queued (no copy). Once frames
        // start to wait, each is copied into the output's own pool so the device gets its buffer
        // back at once: a slow encoder then costs memory (up to `maximumEncoderQueueBytes`), not
        // dropped frames.
        let queued = depth > Self.zeroCopyQueueDepth ? overflowCopy(of: sample) : sample
        writerQueue.async {
            self.process(queued, from: connection)
            self.queueDepth.withLock { $0.current -= 1; $0.videoBytes -= bytes }
        }
    }

    /// Frames that may wait in the writer queue still holding the device's buffer.
    static let zeroCopyQueueDepth = 2
    private let overflowPool = Locked<PixelBufferPool?>(nil)

    private func overflowCopy(of sample: SampleBuffer) -> SampleBuffer {
        guard let pixels = sample.pixelBuffer, pixels.pool != nil || pixels.isBorrowedFromDevice else { return sample }
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
            copy.producerBaseAddress(ofPlane: plane).copyMemory(from: pixels.baseAddress(ofPlane: plane),
                                                        byteCount: pixels.bytesPerRow[plane] * pixels.planeRows[plane])
        }
        return SampleBuffer(payload: .pixels(copy), formatDescription: sample.formatDescription,
                            presentationTime: sample.presentationTime, duration: sample.duration,
                            sequenceNumber: sample.sequenceNumber, discontinuity: sample.discontinuity)
    }

    /// Bench hook: called on the writing thread as each video packet of the next recording reaches
    /// the muxer, with its capture time (session clock, seconds; the recording must not pause).
    @_spi(Testing) public var testingVideoPacketWritten: (@Sendable (Double) -> Void)? {
        get { packetHook.withLock { $0 } }
        set { packetHook.withLock { $0 = newValue } }
    }
    let packetHook = Locked<(@Sendable (Double) -> Void)?>(nil)

    /// Test hook: an extra delay per recorded video frame where frames are encoded (the writer
    /// queue in real time), standing in for a slow encoder.
    @_spi(Testing) public var testingEncodeDelay: Duration {
        get { encodeDelay.withLock { $0 } }
        set { encodeDelay.withLock { $0 = newValue } }
    }

}
