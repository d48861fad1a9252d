/// One whole-second A/V sync marker as found in a recording: the video flash and the audio
/// burst that mark second `second`, either of which may be missing.
public struct SyncMarker: Sendable, Codable, Equatable {
    /// The whole second of presentation time the marker belongs to.
    public var second: Int
    /// PTS (seconds) of the first frame showing the flash, if one was seen.
    public var videoTime: Double?
    /// Onset (seconds) of the audio burst, if one was heard.
    public var audioTime: Double?
    /// `videoTime − audioTime` in seconds when both sides exist: positive means video late.
    /// At frame rates that do not divide a second evenly it includes up to one frame of
    /// quantisation, since the flash rides on the first frame at or after the second.
    public var offset: Double?

    public init(second: Int, videoTime: Double?, audioTime: Double?) {
        self.second = second
        self.videoTime = videoTime
        self.audioTime = audioTime
        if let videoTime, let audioTime {
            offset = videoTime - audioTime
        } else {
            offset = nil
        }
    }
}
