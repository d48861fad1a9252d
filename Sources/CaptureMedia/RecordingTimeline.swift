import CaptureCore

/// Where each captured sample goes in a recorded file: the one timestamp policy of
/// `MovieFileOutput` and `AssetWriter` (issue 20). A value type over plain numbers — no FFmpeg,
/// no locks, no I/O — so every rule is testable with made-up timestamps.
///
/// File time 0 is the capture time `origin` (the first video frame, the first audio buffer of an
/// audio-only file, or `AssetWriter`'s session start). A sample at capture time `pts` lands at file
/// time `pts − origin − pausedDuration`:
/// - **Video** frames land on ticks of `videoTick` (1/90000 s for every common rate: exact, so the
///   camera's own jittered timestamps go into the file). A frame whose tick would not be after the
///   previous one is moved to the next tick and marked `isNudged` (the muxer refuses repeats).
///   Frames before the origin, inside a pause, or at or past `end` are not written.
/// - **Audio** is one contiguous run of samples from file time 0, counted in whole samples at
///   `audioRate`: a buffer lands at the sample nearest its PTS; what overlaps audio already written
///   is cut; a gap before it becomes silence; nothing goes past `end`. Positions are whole samples
///   computed exactly from the rational timestamps, so nothing drifts however long the recording.
/// - **Pause** (`pause()`): video frames are dropped; audio runs on to the end of the last written
///   frame, to the sample, and the buffers that arrive meanwhile are marked `holdForResume`.
///   `resume(at:)` cuts the span from where the file stopped to the resuming sample, so that sample
///   continues the file seamlessly; held buffers placed again then give the file their samples from
///   that instant on. An audio-only file pauses and resumes on audio buffers (nothing is held).
///
/// The caller owns the buffers: it asks where a sample goes (`placeVideo`, `placeAudio`), writes
/// that, and reports what was written (`didWriteVideo`, `didWriteAudio`).
public struct RecordingTimeline: Sendable, Hashable {
    /// Capture time of file time 0.
    public let origin: MediaTime
    /// The video track's tick; nil without a video track.
    public let videoTick: MediaTime?
    /// The audio track's sample rate; nil without an audio track.
    public let audioRate: Int32?
    /// File time where the file ends (a maximum duration, a session's end); not numeric: no end.
    public var end: MediaTime = .invalid
    /// Capture time cut out by pauses so far.
    public private(set) var pausedDuration = MediaTime.zero
    /// Audio samples written (silence included): the audio track runs from 0 to this sample.
    public private(set) var audioSamples: Int64 = 0
    /// The last written frame's tick (−1 before the first).
    public private(set) var lastVideoTick: Int64 = -1
    /// File time where the last written frame ends (its PTS plus its duration).
    public private(set) var videoEnd = MediaTime.zero
    /// Between `pause()` and `resume(at:)`.
    public private(set) var isPaused = false

    public init(origin: MediaTime, videoTick: MediaTime?, audioRate: Int32?) {
        self.origin = origin
        self.videoTick = videoTick
        self.audioRate = audioRate.flatMap { $0 > 0 ? $0 : nil }
    }

    public var hasVideo: Bool { videoTick != nil }
    public var hasAudio: Bool { audioRate != nil }

    /// Capture time of the file's current time 0: origin plus the paused spans.
    public var fileStart: MediaTime { origin + pausedDuration }

    /// File time of a capture time.
    public func fileTime(of pts: MediaTime) -> MediaTime { pts - fileStart }

    /// The audio written, in seconds of file time.
    public var audioDuration: MediaTime { MediaTime(value: audioSamples, timescale: audioRate ?? 1) }

    /// Media written so far: to the last frame's end with video, else the audio's length.
    public var duration: MediaTime { hasVideo ? videoEnd : audioDuration }

    /// An audio-only file's audio has reached `end` (a file with video ends on a frame instead).
    public var audioReachedEnd: Bool { !hasVideo && end.isNumeric && audioDuration >= end }

    // MARK: Pausing

    /// Stops the file where it stands; video is dropped and audio cut at `duration` until `resume(at:)`.
    public mutating func pause() { isPaused = true }

    /// Whether a sample of `mediaType` can resume a paused file: a video frame, or an audio buffer
    /// when there is no video.
    public func resumes(on mediaType: MediaType) -> Bool {
        mediaType == .video ? hasVideo : hasAudio && !hasVideo
    }

    /// Resumes with a sample at capture time `pts`: the span from where the file stopped
    /// (`duration`) to `pts` is cut, so `pts` lands at file time `duration`.
    public mutating func resume(at pts: MediaTime) {
        pausedDuration += pts - (fileStart + duration)
        isPaused = false
    }

    // MARK: Video

    /// A video frame's place in the file.
    public struct VideoSlot: Sendable, Hashable {
        /// The frame's tick in the track (of `videoTick`).
        public var tick: Int64
        /// The frame's file time, before rounding to the tick.
        public var fileTime: MediaTime
        /// The frame's own tick was not after the previous frame's: `tick` is the next one instead.
        public var isNudged: Bool
    }

    public enum VideoPlacement: Sendable, Hashable {
        /// Write the frame at this slot, then call `didWriteVideo`.
        case write(VideoSlot)
        /// The frame comes before the origin.
        case beforeStart
        /// The file is paused.
        case paused
        /// The frame lies at or past `end`: the file ends before it.
        case pastEnd
        /// The file has no video track.
        case noTrack
    }

    /// Where the frame at capture time `pts` goes.
    public func placeVideo(at pts: MediaTime) -> VideoPlacement {
        guard let videoTick else { return .noTrack }
        if isPaused { return .paused }
        let fileTime = fileTime(of: pts)
        if fileTime < .zero { return .beforeStart }
        if end.isNumeric && fileTime >= end { return .pastEnd }
        let tick = TrackTimeBase.ticks(fileTime, in: videoTick)
        return .write(VideoSlot(tick: max(tick, lastVideoTick + 1), fileTime: fileTime, isNudged: tick <= lastVideoTick))
    }

    /// The frame placed at `slot`, lasting `duration`, was written.
    public mutating func didWriteVideo(_ slot: VideoSlot, duration: MediaTime) {
        lastVideoTick = slot.tick
        videoEnd = slot.fileTime + duration
    }

    // MARK: Audio

    /// What of one audio buffer goes into the file.
    public struct AudioPlacement: Sendable, Hashable {
        /// Silent samples to write first: the gap between the audio written and this buffer.
        public var silence: Int
        /// The buffer's frames written after the silence (empty: none).
        public var frames: Range<Int>
        /// Paused with video: keep the buffer and place it again after `resume(at:)`, whose instant
        /// it may straddle.
        public var holdForResume: Bool

        public init(silence: Int = 0, frames: Range<Int> = 0..<0, holdForResume: Bool = false) {
            self.silence = silence
            self.frames = frames
            self.holdForResume = holdForResume
        }

        public static let nothing = AudioPlacement()
        /// Samples this placement adds to the track.
        public var sampleCount: Int { silence + frames.count }
    }

    /// Where the audio buffer of `frameCount` samples starting at capture time `pts` goes.
    public func placeAudio(at pts: MediaTime, frameCount: Int) -> AudioPlacement {
        guard let rate = audioRate else { return .nothing }
        var limit = end
        if isPaused {
            // Audio-only files drop what arrives while paused; with video, audio runs on to the
            // paused video's end.
            guard hasVideo else { return .nothing }
            limit = limit.isNumeric ? min(limit, videoEnd) : videoEnd
        }
        // Whole samples of file time, computed from the rational times (no rounding carried over).
        let first = fileTime(of: pts).convertScale(rate).value
        let endSample = limit.isNumeric ? limit.convertScale(rate).value : Int64.max
        var placement = AudioPlacement(holdForResume: isPaused)
        if first > audioSamples && endSample > audioSamples {
            placement.silence = Int(min(first, endSample) - audioSamples)
        }
        let written = audioSamples + Int64(placement.silence)
        let lower = max(0, written - first)
        let upper = min(Int64(frameCount), endSample == .max ? Int64(frameCount) : endSample - first)
        if upper > lower { placement.frames = Int(lower)..<Int(upper) }
        return placement
    }

    /// `count` audio samples (silence or a buffer's frames, as placed) were written.
    public mutating func didWriteAudio(_ count: Int) {
        audioSamples += Int64(count)
    }
}
