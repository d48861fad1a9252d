import CaptureCore
import CaptureMedia
import Dispatch
import Foundation

/// Told when an `AudioRecorder` finishes (AVAudioRecorderDelegate); not called on interruption.
public protocol AudioRecorderDelegate: AnyObject, Sendable {
    func audioRecorderDidFinishRecording(_ recorder: AudioRecorder, successfully flag: Bool)
}

/// What an `AudioRecorder` writes: WAV (16-bit PCM) or M4A (AAC), at a rate and channel count
/// (nil = the microphone's).
public struct AudioRecorderSettings: Sendable, Hashable {
    public enum Format: String, Sendable, Hashable, CaseIterable { case wav, m4a }
    public var format: Format
    public var sampleRate: Int?
    public var channelCount: Int?
    /// AAC bit rate in bits/s (M4A only; default 64 kbit/s per channel).
    public var bitRate: Int?

    public init(format: Format, sampleRate: Int? = nil, channelCount: Int? = nil, bitRate: Int? = nil) {
        self.format = format
        self.sampleRate = sampleRate
        self.channelCount = channelCount
        self.bitRate = bitRate
    }
}

/// Records a microphone to a file (AVAudioRecorder), with live metering. It runs its own capture
/// session (virtual or real-time pace) with the microphone and writes through `MovieWriter`.
public final class AudioRecorder: Sendable {
    public let path: String
    public let settings: AudioRecorderSettings
    public let microphone: CaptureDevice
    private let session: CaptureSession
    private let output: RecorderOutput

    /// A recorder for `path` (an existing regular file there is replaced, atomically, when the
    /// recording finishes, as AVAudioRecorder overwrites it; anything else there is refused) from the microphone `microphoneID` in `registry`.
    public init(path: String, settings: AudioRecorderSettings, microphone microphoneID: String = "sim:mic",
                registry: DeviceRegistry = CaptureKit.makeRegistry(), pace: CapturePace = .virtual) throws(CaptureError) {
        let device = try registry.device(uniqueID: microphoneID)
        guard device.mediaType == .audio, case .audio(let format) = device.activeFormat.formatDescription else {
            throw .invalidArgument("\(microphoneID) is not a microphone")
        }
        if let rate = settings.sampleRate, !(8000...192_000).contains(rate) { throw .invalidArgument("sample rate \(rate) Hz is outside 8000…192000") }
        if let channels = settings.channelCount, !(1...8).contains(channels) { throw .invalidArgument("channel count \(channels) is outside 1…8") }
        if settings.format == .wav, settings.bitRate != nil { throw .invalidArgument("a WAV recording (linear PCM) has no bit rate") }
        let folder = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        if !folder.isEmpty, !(FileManager.default.fileExists(atPath: folder, isDirectory: &isDirectory) && isDirectory.boolValue) {
            throw .outputDirectoryMissing(path: path)
        }
        self.path = path
        self.settings = settings
        self.microphone = device
        session = CaptureSession(pace: pace)
        let channels = settings.channelCount ?? format.channelCount
        output = RecorderOutput(microphone: device, path: path, fileType: settings.format == .wav ? .wav : .m4a, encoder: AudioEncoderSettings(
            input: format, sampleRate: settings.sampleRate, channelCount: channels,
            bitrate: settings.format == .m4a ? (settings.bitRate ?? 64_000 * channels) : nil,
            codec: settings.format == .wav ? .pcmS16 : .aac))
        try session.addInput(CaptureDeviceInput(device: device))
        try session.addOutput(output)
        output.stopSession = { [session] in session.stopRunning() }
    }

    public var delegate: (any AudioRecorderDelegate)? {
        get { output.delegate }
        set { output.delegate = newValue; output.recorder = self }
    }

    /// Creates the file (replacing an existing one) so `record` starts at once. Returns success.
    @discardableResult
    public func prepareToRecord() -> Bool {
        output.recorder = self
        return output.prepare()
    }

    /// Starts or resumes recording. Returns success.
    @discardableResult
    public func record() -> Bool { record(limit: nil) }

    /// Records for `duration` seconds of audio (sample-accurate), then stops by itself.
    @discardableResult
    public func record(forDuration duration: TimeInterval) -> Bool {
        guard duration > 0, duration.isFinite else { return false }
        return record(limit: duration)
    }

    private func record(limit: Double?) -> Bool {
        output.recorder = self
        // The audio session of the microphone's registry must allow recording (a playback-only
        // category refuses it with `audioCategoryRefuses`, kept in `error`).
        if let audioSession = AudioSession.governing(microphone) {
            do { try audioSession.checkRecordingAllowed("recording from \(microphone.uniqueID)") } catch {
                output.refuse(error)
                return false
            }
            observeInterruptions(of: audioSession)
        }
        guard output.prepare(), output.start(limit: limit) else { return false }
        if !session.isRunning {
            do { try session.startRunning() } catch {
                output.fail(error)
                return false
            }
        }
        return true
    }

    private let interruptionObserver = Locked<(session: AudioSession, token: Int)?>(nil)

    /// An interruption of the audio session (another session that does not mix became active)
    /// pauses the recording, as AVAudioRecorder does; `record()` resumes it when the app decides to.
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

    /// Stops taking audio until `record()`; the file stays open.
    public func pause() { output.pause() }

    /// Finishes the file; the delegate hears of it.
    public func stop() {
        output.stop(success: true)
        session.stopRunning()
    }

    /// Deletes the file; only while stopped. Returns success.
    @discardableResult
    public func deleteRecording() -> Bool {
        guard !output.isActive else { return false }
        return OutputPath.removeRegularFile(path)  // never a folder, link, FIFO or device
    }

    public var isRecording: Bool { output.isRecording }
    /// Seconds recorded so far (0 once stopped, as AVAudioRecorder).
    public var currentTime: TimeInterval { output.currentTime }
    /// Seconds in the last finished recording.
    public var recordedDuration: TimeInterval { output.recordedDuration }
    /// Why the recording failed, if it did.
    public var error: CaptureError? { output.error }

    /// Waits until the recording is finished (stopped, at its duration, or failed) and the
    /// microphone is free for another session.
    public func waitUntilFinished() async {
        while output.isActive { try? await Task.sleep(for: .milliseconds(5)) }
        // A recording that reached its duration stops its session from another thread; stopping
        // here too waits for that stop (they are serialized), so the device is released on return
        // (under TSan a session started right after found the microphone still streaming).
        session.stopRunning()
    }

    // MARK: Metering

    public var isMeteringEnabled: Bool {
        get { output.meteringEnabled }
        set { output.meteringEnabled = newValue }
    }

    /// Turns the audio since the previous call into the readings below.
    public func updateMeters() { output.updateMeters() }
    /// RMS level of the channel in dBFS, −160…0 (−160 when metering is off).
    public func averagePower(forChannel channel: Int) -> Float { output.meter.withLock { $0.averagePower(channel) } }
    /// Peak level of the channel in dBFS, −160…0.
    public func peakPower(forChannel channel: Int) -> Float { output.meter.withLock { $0.peakPower(channel) } }
}

/// The recorder's capture output: writes audio while recording, meters it, stops at the limit.
final class RecorderOutput: CaptureOutput, Sendable {
    // Mutable state lives in `state`/`meter` (Locked); the closures and weak refs below are set
    // once before the session starts and read under `state`'s lock afterwards.
    let attachment = OutputAttachment()
    let microphone: CaptureDevice
    let path: String
    let fileType: MediaFileType
    let encoder: AudioEncoderSettings
    let meter = Locked(AudioLevelMeter())
    private let state = Locked(State())
    var stopSession: (@Sendable () -> Void)? {
        get { state.withLock { $0.stopSession } }
        set { state.withLock { $0.stopSession = newValue } }
    }
    var delegate: (any AudioRecorderDelegate)? {
        get { state.withLock { $0.delegate } }
        set { state.withLock { $0.delegate = newValue } }
    }
    var recorder: AudioRecorder? {
        get { state.withLock { $0.recorder } }
        set { state.withLock { $0.recorder = newValue } }
    }

    /// `finishing`: stopped, the file's trailer still being written. The recorder counts as active
    /// until the file and its error (with how much was kept) are final, so `waitUntilFinished`
    /// never returns between the stop and the error that says what the file holds.
    enum Phase { case idle, prepared, recording, paused, finishing }
    struct State {
        var phase = Phase.idle
        var writer: MovieWriter?
        /// Where the writer writes: `path`, or a temporary beside it when a regular file is there
        /// (renamed over it once finished, so the old file is replaced atomically).
        var writingPath: String?
        var written: Int64 = 0
        var limit: Int64?
        var lastDuration = 0.0
        var metering = false
        var error: CaptureError?
        var stopSession: (@Sendable () -> Void)?
        var delegate: (any AudioRecorderDelegate)?
        weak var recorder: AudioRecorder?
    }

    init(microphone: CaptureDevice, path: String, fileType: MediaFileType, encoder: AudioEncoderSettings) {
        self.microphone = microphone
        self.path = path
        self.fileType = fileType
        self.encoder = encoder
    }

    func accepts(_ mediaType: MediaType) -> Bool { mediaType == .audio }

    var demand: OutputDemand { state.withLock { $0.phase == .recording ? .ready : .idle } }
    var isRecording: Bool { state.withLock { $0.phase == .recording } }
    var isActive: Bool { state.withLock { $0.phase != .idle } }
    var error: CaptureError? { state.withLock { $0.error } }
    var currentTime: Double { state.withLock { $0.phase == .idle || $0.phase == .finishing ? 0 : Double($0.written) / Double(encoder.input.sampleRate) } }
    var recordedDuration: Double { state.withLock { $0.lastDuration } }

    var meteringEnabled: Bool {
        get { state.withLock { $0.metering } }
        set { state.withLock { $0.metering = newValue } }
    }

    func updateMeters() {
        guard meteringEnabled else { return }
        meter.withLock { $0.update() }
    }

    func prepare() -> Bool {
        state.withLock { s in
            guard s.phase == .idle else { return s.phase != .finishing }  // the last file is still being finished
            do {
                // As AVAudioRecorder, a file at the path is overwritten — but only a regular file, and
                // atomically: the new one is written beside it and renamed over it when finished.
                // A folder, link, FIFO or device there is refused (`outputNotReplaceable`).
                try OutputPath.checkNew(path, existing: .replaceRegularFile)
                let target = OutputPath.kind(at: path) == nil ? path : OutputPath.temporaryPath(beside: path)
                s.writer = try MovieWriter(path: target, fileType: fileType, video: nil, audio: encoder)
                s.writingPath = target
                s.written = 0
                s.error = nil
                s.phase = .prepared
                return true
            } catch {
                s.error = (error as? CaptureError) ?? .fileOperationFailed(path: path, reason: "\(error)")
                return false
            }
        }
    }

    func start(limit: Double?) -> Bool {
        let ok = state.withLock { s -> Bool in
            guard s.phase == .prepared || s.phase == .paused else { return s.phase == .recording }
            if let limit { s.limit = s.written + Int64((limit * Double(encoder.input.sampleRate)).rounded()) }
            s.phase = .recording
            return true
        }
        attachment.demandChanged()
        return ok
    }

    func pause() {
        state.withLock { if $0.phase == .recording { $0.phase = .paused } }
        attachment.demandChanged()
    }

    /// Records why `record` was refused, leaving the recorder as it was.
    func refuse(_ error: CaptureError) { state.withLock { $0.error = error } }

    func fail(_ error: CaptureError) {
        state.withLock { $0.error = error }
        stop(success: false)
    }

    /// Finishes the file once; tells the delegate with the outcome, after `release` (stopping the
    /// session) when one is given, so the delegate finds the microphone free.
    func stop(success: Bool, release: (@Sendable () -> Void)? = nil) {
        let finished: (MovieWriter?, String?, (any AudioRecorderDelegate)?, AudioRecorder?)? = state.withLock { s in
            guard s.phase != .idle, s.phase != .finishing else { return nil }
            s.phase = .finishing
            s.lastDuration = Double(s.written) / Double(encoder.input.sampleRate)
            s.limit = nil
            defer { s.writer = nil; s.writingPath = nil }
            return (s.writer, s.writingPath, s.delegate, s.recorder)
        }
        guard let (writer, writingPath, delegate, recorder) = finished else { return }
        attachment.demandChanged()
        var ok = success
        var failure: CaptureError?
        do throws(CaptureError) { try writer?.finish() } catch {
            failure = error
            ok = false
        }
        // Replacing a regular file: what was recorded (all of it, or what a failure kept) takes its place.
        if let writingPath, writingPath != path, OutputPath.isRegularFile(writingPath) {
            do throws(CaptureError) { try OutputPath.commit(writingPath, replacing: path) } catch {
                if failure == nil { failure = error }
                ok = false
            }
        }
        state.withLock { s in
            if let failure { s.error = failure }
            s.phase = .idle
        }
        let flag = ok
        guard release != nil || (delegate != nil && recorder != nil) else { return }
        DispatchQueue.global().async {
            release?()
            if let delegate, let recorder { delegate.audioRecorderDidFinishRecording(recorder, successfully: flag) }
        }
    }

    /// The session stopped under the recorder because its microphone was unplugged: the file is
    /// finished (playable up to the last sample) and `error` is `deviceDisconnected`. (Any other
    /// stop — the recorder's own, an interruption that will end — leaves the recording as it is.)
    func sessionDidStop() {
        guard !microphone.isConnected,
              state.withLock({ $0.phase == .recording || $0.phase == .paused || $0.phase == .prepared }) else { return }
        fail(.deviceDisconnected(microphone.uniqueID))
    }

    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        guard let buffer = sample.audioBuffer else { return }
        enum Outcome { case none, reachedLimit, failed(CaptureError) }
        let outcome: Outcome = state.withLock { s in
            guard s.phase == .recording, let writer = s.writer else { return .none }
            var piece = buffer
            if let limit = s.limit, s.written + Int64(buffer.frameLength) > limit {
                let keep = Int(max(0, limit - s.written))
                piece = buffer.copy(frames: 0..<keep)
            }
            do throws(CaptureError) {
                if piece.frameLength > 0 { try writer.appendAudio(piece) }
            } catch {
                return .failed(error)
            }
            s.written += Int64(piece.frameLength)
            if s.metering { meter.withLock { $0.add(piece) } }
            if let limit = s.limit, s.written >= limit { return .reachedLimit }
            return .none
        }
        switch outcome {
        case .none: break
        case .reachedLimit:
            stop(success: true, release: self.stopSession)
        case .failed(let error):
            fail(error)
        }
    }
}
