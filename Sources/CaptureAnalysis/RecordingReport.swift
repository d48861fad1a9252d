/// What `RecordingAnalyzer` found in a recording: frame continuity, sync markers and the tone.
public struct RecordingReport: Sendable, Codable, Equatable {
    /// At most this many entries are listed in `droppedIndices` (`droppedCount` has them all), so
    /// one misread stamp far from the rest cannot make the report billions of entries long.
    public static let droppedIndexListLimit = 10_000

    public var videoFrameCount: Int
    /// Decoded stamp of every frame in presentation order; nil where it was unreadable.
    public var frameIndices: [Int?]
    /// Frames whose stamp could not be decoded.
    public var unreadableFrames: Int
    /// Indices between the smallest and largest decoded index that never appeared, ascending;
    /// truncated to `droppedIndexListLimit` entries.
    public var droppedIndices: [Int]
    /// How many indices are missing in total (`droppedIndices` may be truncated).
    public var droppedCount: Int
    /// Indices that appeared on more than one frame, ascending, each listed once.
    public var duplicatedIndices: [Int]
    /// Frames whose index is lower than the previous decoded index in presentation order.
    public var reorderedCount: Int
    /// PTS of the first frame of each run of consecutive frames showing the sync flash.
    public var flashTimes: [Double]
    /// Onsets of the audio sync bursts, on the audio timeline.
    public var burstOnsets: [Double]
    /// Flashes paired with bursts, ordered by second.
    public var syncMarkers: [SyncMarker]
    /// Length of the audio in seconds; nil when no audio was added.
    public var audioDuration: Double?
    /// Frequency of the continuous tone, measured on the longest burst-free stretch.
    public var dominantFrequency: Double?
    /// RMS level of all audio in dBFS.
    public var audioRMSDBFS: Double?

    public init(videoFrameCount: Int = 0, frameIndices: [Int?] = [], unreadableFrames: Int = 0,
                droppedIndices: [Int] = [], droppedCount: Int = 0, duplicatedIndices: [Int] = [],
                reorderedCount: Int = 0, flashTimes: [Double] = [], burstOnsets: [Double] = [],
                syncMarkers: [SyncMarker] = [], audioDuration: Double? = nil,
                dominantFrequency: Double? = nil, audioRMSDBFS: Double? = nil) {
        self.videoFrameCount = videoFrameCount
        self.frameIndices = frameIndices
        self.unreadableFrames = unreadableFrames
        self.droppedIndices = droppedIndices
        self.droppedCount = droppedCount
        self.duplicatedIndices = duplicatedIndices
        self.reorderedCount = reorderedCount
        self.flashTimes = flashTimes
        self.burstOnsets = burstOnsets
        self.syncMarkers = syncMarkers
        self.audioDuration = audioDuration
        self.dominantFrequency = dominantFrequency
        self.audioRMSDBFS = audioRMSDBFS
    }

    /// Frame continuity is perfect: every stamp read, none missing, repeated or out of order.
    /// Says nothing about audio or sync; check `syncMarkers` for that.
    public var isClean: Bool {
        droppedCount == 0 && duplicatedIndices.isEmpty && reorderedCount == 0 && unreadableFrames == 0
    }
}
