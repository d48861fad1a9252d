/// Where an `AudioPlayer` (or the virtual microphone) sends its samples: the simulated speaker, or
/// an ALSA playback PCM. Samples are interleaved float32 frames in `format`.
public protocol AudioOutputSink: AnyObject, Sendable {
    /// The output's name (`sim:speaker`, `hw:Loopback,0,0`).
    var uniqueID: String { get }
    /// Interleaved float32 at the output's rate and channel count.
    var format: AudioStreamFormat { get }
    /// Frames written so far (the output's clock for `AudioPlayer.deviceCurrentTime`).
    var playedFrameCount: Int { get }
    /// True when `write` waits for the device (real hardware paces the writer); false when the
    /// writer paces itself (the simulated speaker takes samples as fast as they come).
    var pacesItself: Bool { get }
    /// Playback begins (opens the device); throws when it cannot.
    func beginPlayback() throws(CaptureError)
    /// Plays interleaved frames; throws when the device fails for good (unplugged).
    func write(_ samples: [Float]) throws(CaptureError)
    /// Playback ends (lets what was written play out, closes the device).
    func endPlayback()
}
