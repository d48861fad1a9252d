import CaptureCore
import CaptureMedia
import Dispatch
import Foundation

/// Told when an `AudioPlayer` reaches the end of its last loop (AVAudioPlayerDelegate).
public protocol AudioPlayerDelegate: AnyObject, Sendable {
    func audioPlayerDidFinishPlaying(_ player: AudioPlayer, successfully flag: Bool)
}

/// Plays an audio file (AVAudioPlayer) to an `AudioOutputSink`: a `SimulatedSpeaker`, in virtual
/// time (as fast as the speaker takes it) or in real time, or an ALSA playback PCM
/// (`init(path:device:)`), which paces playback itself. On ALSA an underrun is recovered and
/// counted (`ALSAPlaybackDevice.underrunCount`); an unplugged device ends playback (the delegate
/// hears `successfully: false`, `error` is `deviceDisconnected`) and the audio session posts a
/// route change `oldDeviceUnavailable`. The file is decoded once; playback converts it to the
/// speaker's rate and channels (libswresample), then applies volume and pan. A rate other than
/// 1 (0.5…2, with `enableRate`) plays the samples faster or slower — the pitch moves with it.
public final class AudioPlayer: Sendable {
    public let path: String
    /// Where the samples go.
    public let output: any AudioOutputSink
    /// The simulated speaker, when that is the output.
    public var speaker: SimulatedSpeaker? { output as? SimulatedSpeaker }
    public let pace: CapturePace
    /// The file's format and length.
    public let fileFormat: AudioStreamFormat
    public let duration: TimeInterval
    private let samples: [Float]
    private let state = Locked(State())
    private let meter = Locked(AudioLevelMeter())
    private let queue = DispatchQueue(label: "CaptureKit.AudioPlayer")

    struct State {
        var volume: Float = 1
        var pan: Float = 0
        var enableRate = false
        var rate: Float = 1
        var numberOfLoops = 0
        var loopsPlayed = 0
        var position = 0  // source frames
        var playing = false
        var rendering = false
        var generation = 0
        var metering = false
        var delegate: (any AudioPlayerDelegate)?
        var error: CaptureError?
    }

    /// The audio session whose category decides whether this player may play (nil: `AudioSession.shared`).
    public let audioSession: AudioSession?

    public convenience init(path: String, speaker: SimulatedSpeaker, pace: CapturePace = .virtual,
                            audioSession: AudioSession? = nil) throws(CaptureError) {
        try self.init(path: path, output: speaker, pace: pace, audioSession: audioSession)
    }

    /// Plays to an ALSA playback PCM (`hw:CARD,DEV`, `default`, …), stereo float32 at 48 kHz
    /// (S16 when the card takes no float); the card paces playback.
    public convenience init(path: String, device: String, audioSession: AudioSession? = nil) throws(CaptureError) {
        try self.init(path: path, output: ALSAPlaybackDevice(name: device), pace: .realtime, audioSession: audioSession)
    }

    public init(path: String, output: any AudioOutputSink, pace: CapturePace = .virtual,
                audioSession: AudioSession? = nil) throws(CaptureError) {
        guard FileManager.default.fileExists(atPath: path) else { throw .fileOperationFailed(path: path, reason: "no such file") }
        self.audioSession = audioSession
        self.path = path
        self.output = output
        self.pace = pace
        var decoded: [Float] = []
        var format: AudioStreamFormat?
        do {
            try MediaFileReader(path: path).decode(video: nil, audio: { chunk, channels, rate, _ in
                if format == nil { format = AudioStreamFormat(sampleRate: rate, channelCount: channels, sampleFormat: .float32) }
                decoded += chunk
            })
        } catch {
            throw (error as? CaptureError) ?? .codecFailure(operation: "decoding \(path)", code: -1, message: "\(error)")
        }
        guard let format else { throw .invalidArgument("\(path) has no audio track") }
        fileFormat = format
        samples = decoded
        duration = Double(decoded.count / format.channelCount) / Double(format.sampleRate)
    }

    public var delegate: (any AudioPlayerDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }

    /// 0…1.
    public var volume: Float {
        get { state.withLock { $0.volume } }
        set { state.withLock { $0.volume = max(0, min(1, newValue)) } }
    }

    /// −1 (left) … 1 (right); applies to a stereo speaker.
    public var pan: Float {
        get { state.withLock { $0.pan } }
        set { state.withLock { $0.pan = max(-1, min(1, newValue)) } }
    }

    /// Must be set before `prepareToPlay`/`play` for `rate` to apply.
    public var enableRate: Bool {
        get { state.withLock { $0.enableRate } }
        set { state.withLock { $0.enableRate = newValue } }
    }

    /// 0.5…2.0 when `enableRate` is set.
    public var rate: Float {
        get { state.withLock { $0.rate } }
        set { state.withLock { $0.rate = max(0.5, min(2, newValue)) } }
    }

    /// Extra plays after the first; negative = until stopped.
    public var numberOfLoops: Int {
        get { state.withLock { $0.numberOfLoops } }
        set { state.withLock { $0.numberOfLoops = newValue } }
    }

    public var isPlaying: Bool { state.withLock { $0.playing } }

    /// Why `play` was refused or playback ended early (nil after a clean play).
    public var error: CaptureError? { state.withLock { $0.error } }

    /// Position in the file in seconds; settable.
    public var currentTime: TimeInterval {
        get { state.withLock { Double($0.position) / Double(fileFormat.sampleRate) } }
        set {
            let frames = samples.count / fileFormat.channelCount
            state.withLock { $0.position = max(0, min(frames, Int((newValue * Double(fileFormat.sampleRate)).rounded()))) }
        }
    }

    /// The output's clock in seconds (AVAudioPlayer.deviceCurrentTime).
    public var deviceCurrentTime: TimeInterval { Double(output.playedFrameCount) / Double(output.format.sampleRate) }

    @discardableResult
    public func prepareToPlay() -> Bool { true }

    /// Starts or resumes playback.
    @discardableResult
    public func play() -> Bool { play(startingAtSpeakerFrame: nil) }

    /// Starts playback when the speaker's clock (`deviceCurrentTime`) reaches `time`; the speaker
    /// plays silence until then.
    @discardableResult
    public func play(atTime time: TimeInterval) -> Bool {
        guard time.isFinite, time >= deviceCurrentTime else { return false }
        return play(startingAtSpeakerFrame: Int((time * Double(output.format.sampleRate)).rounded()))
    }

    private func play(startingAtSpeakerFrame start: Int?) -> Bool {
        let session = audioSession ?? AudioSession.shared
        do { try session.checkPlaybackAllowed("playing \(path)") } catch {
            state.withLock { $0.error = error }
            return false
        }
        observeInterruptions(of: session)
        let generation: Int? = state.withLock { s in
            guard !s.playing else { return nil }
            s.playing = true
            s.generation += 1
            return s.generation
        }
        guard let generation else { return true }
        do throws(CaptureError) {
            try output.beginPlayback()
            if let start, start > output.playedFrameCount {
                try output.write([Float](repeating: 0, count: (start - output.playedFrameCount) * output.format.channelCount))
            }
        } catch {
            state.withLock { s in
                s.playing = false
                s.error = error
            }
            output.endPlayback()
            return false
        }
        state.withLock { $0.error = nil }
        queue.async { self.render(generation) }
        return true
    }

    private let interruptionObserver = Locked<(session: AudioSession, token: Int)?>(nil)

    /// An interruption of the audio session pauses playback, as AVAudioPlayer does; `play()`
    /// resumes it when the app decides to (on `.ended(shouldResume: true)`, typically).
    private func observeInterruptions(of audioSession: AudioSession) {
        interruptionObserver.withLock { current in
            guard current?.session !== audioSession else { return }
            if let current { current.session.removeObserver(current.token) }
            let token = audioSession.addObserver { [weak self] event in
                if case .interruption(.began) = event { self?.pause() }
            }
            current = (audioSession, token)
        }
    }

    deinit {
        if let (session, token) = interruptionObserver.withLock({ $0 }) { session.removeObserver(token) }
    }

    /// Stops playback, keeping the position.
    public func pause() {
        state.withLock { $0.playing = false }
    }

    /// Stops playback (the position stays where it is, as AVAudioPlayer).
    public func stop() {
        state.withLock { $0.playing = false }
    }

    /// Waits until playback has stopped (finished, paused or stopped).
    public func waitUntilStopped() async {
        while state.withLock({ $0.playing || $0.rendering }) { try? await Task.sleep(for: .milliseconds(5)) }
    }

    // MARK: Metering

    public var isMeteringEnabled: Bool {
        get { state.withLock { $0.metering } }
        set { state.withLock { $0.metering = newValue } }
    }

    public func updateMeters() {
        guard isMeteringEnabled else { return }
        meter.withLock { $0.update() }
    }

    public func averagePower(forChannel channel: Int) -> Float { meter.withLock { $0.averagePower(channel) } }
    public func peakPower(forChannel channel: Int) -> Float { meter.withLock { $0.peakPower(channel) } }

    // MARK: Rendering (on `queue`)

    private static let chunkFrames = 1024

    private func render(_ generation: Int) {
        state.withLock { $0.rendering = true }
        defer {
            state.withLock { $0.rendering = false }
        }
        let settings = state.withLock { $0 }
        let rate = settings.enableRate ? settings.rate : 1
        let channels = fileFormat.channelCount
        let frames = samples.count / channels
        let out = output.format
        let sourceRate = Int((Double(fileFormat.sampleRate) * Double(rate)).rounded())
        let resampler: AudioResampler
        do {
            resampler = try AudioResampler(input: AudioStreamFormat(sampleRate: sourceRate, channelCount: channels, sampleFormat: .float32),
                                           outputSampleRate: out.sampleRate, outputChannels: out.channelCount)
        } catch {
            output.endPlayback()
            finish(generation, success: false)
            return
        }
        let stop = StopSignal()
        var hostNext = HostClock.now()
        var finished = false
        while true {
            let (playing, position, volume, pan, metering) = state.withLock { s in (s.playing && s.generation == generation, s.position, s.volume, s.pan, s.metering) }
            guard playing else { break }
            var planar: [[Float]]
            if position >= frames {
                let (loopAgain, _) = state.withLock { s -> (Bool, Int) in
                    if s.numberOfLoops < 0 || s.loopsPlayed < s.numberOfLoops {
                        s.loopsPlayed += 1
                        s.position = 0
                        return (true, 0)
                    }
                    return (false, 0)
                }
                if loopAgain { continue }
                planar = (try? resampler.flush()) ?? []
                finished = true
            } else {
                let count = min(Self.chunkFrames, frames - position)
                let chunk = AudioPCMBuffer(format: resampler.input, frameCapacity: count)
                chunk.withProducerBytes { raw in
                    samples.withUnsafeBytes { src in
                        raw.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[(position * channels * 4)..<((position + count) * channels * 4)]))
                    }
                }
                planar = (try? resampler.convert(chunk)) ?? []
                state.withLock { if $0.generation == generation { $0.position = position + count } }
            }
            let produced = planar.first?.count ?? 0
            var interleaved = [Float](repeating: 0, count: produced * out.channelCount)
            for c in 0..<min(out.channelCount, planar.count) {
                let gain = volume * (out.channelCount == 2 ? (c == 0 ? min(1, 1 - pan) : min(1, 1 + pan)) : 1)
                for i in 0..<produced { interleaved[i * out.channelCount + c] = planar[c][i] * gain }
            }
            if metering { interleaved.withUnsafeBufferPointer { buffer in meter.withLock { $0.add(buffer, channels: out.channelCount) } } }
            do throws(CaptureError) { try output.write(interleaved) } catch {
                state.withLock { $0.error = error }
                if case .deviceDisconnected(let uid) = error { (audioSession ?? AudioSession.shared).playbackDeviceUnavailable(uid) }
                output.endPlayback()
                finish(generation, success: false)
                return
            }
            if pace == .realtime, !output.pacesItself {
                hostNext = hostNext + MediaTime(value: Int64(produced), timescale: Int32(out.sampleRate))
                _ = stop.sleep(untilHostTime: hostNext)
            }
            if finished { break }
        }
        // What was written plays out (an ALSA card drains its buffer) before playback counts as
        // finished: `waitUntilStopped` and the delegate come after the last sample was heard.
        output.endPlayback()
        if finished { finish(generation, success: true) }
    }

    private func finish(_ generation: Int, success: Bool) {
        let delegate: (any AudioPlayerDelegate)? = state.withLock { s in
            guard s.generation == generation else { return nil }
            s.playing = false
            s.loopsPlayed = 0
            if success { s.position = 0 }
            return s.delegate
        }
        if let delegate { DispatchQueue.global().async { delegate.audioPlayerDidFinishPlaying(self, successfully: success) } }
    }
}
