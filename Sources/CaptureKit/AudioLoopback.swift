import CaptureCore
import Foundation

/// A simulated loudspeaker: it keeps every sample played to it (so tests can assert on them) on
/// a timeline in its own sample clock, and a loopback microphone (`LoopbackDriver`) hears it.
public final class SimulatedSpeaker: AudioOutputSink {
    public var uniqueID: String { "sim:speaker" }
    public var pacesItself: Bool { false }
    public func write(_ samples: [Float]) throws(CaptureError) { play(samples) }

    /// The speaker's format: interleaved float32.
    public let format: AudioStreamFormat
    private let state = Locked(State())
    private let changed = NSCondition()

    struct State {
        var samples: [Float] = []
        var activePlayers = 0
    }

    /// The speaker behind `loop:mic` in `CaptureKit.makeRegistry()` (and `capture audio play`).
    public static let shared = SimulatedSpeaker()

    public init(format: AudioStreamFormat = AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .float32)) {
        precondition(format.sampleFormat == .float32, "the simulated speaker plays float32")
        self.format = format
    }

    /// Everything played so far, interleaved.
    public var playedSamples: [Float] { state.withLock { $0.samples } }
    /// Frames played so far.
    public var playedFrameCount: Int { state.withLock { $0.samples.count } / format.channelCount }

    /// Forgets what was played.
    public func reset() { state.withLock { $0.samples = [] } }

    /// Appends interleaved frames to the timeline.
    func play(_ samples: [Float]) {
        state.withLock { $0.samples += samples }
        wake()
    }

    public func beginPlayback() throws(CaptureError) { state.withLock { $0.activePlayers += 1 } }

    public func endPlayback() {
        state.withLock { $0.activePlayers -= 1 }
        wake()
    }

    private func wake() {
        changed.lock()
        changed.broadcast()
        changed.unlock()
    }

    /// Frames `first ..< first + count` of the timeline; waits while a player is still playing and
    /// the frames are not there yet, and gives silence for frames nothing was played to.
    func read(first: Int, count: Int, stop: StopSignal) -> [Float]? {
        let channels = format.channelCount
        changed.lock()
        defer { changed.unlock() }
        while true {
            if stop.isStopped { return nil }
            let (available, playing) = state.withLock { ($0.samples.count / channels, $0.activePlayers > 0) }
            if available >= first + count || !playing { break }
            _ = changed.wait(until: Date().addingTimeInterval(0.05))
        }
        return state.withLock { s in
            var out = [Float](repeating: 0, count: count * channels)
            let start = first * channels
            let end = min(s.samples.count, (first + count) * channels)
            if end > start { out.replaceSubrange(0..<(end - start), with: s.samples[start..<end]) }
            return out
        }
    }
}

/// A driver with one microphone, `loop:mic`, that hears what its `SimulatedSpeaker` played:
/// microphone sample n is speaker sample n (virtual time waits for a playing speaker; silence
/// where nothing was played).
public struct LoopbackDriver: CaptureDriver {
    public let scheme = "loop"
    public let speaker: SimulatedSpeaker
    public static let microphoneID = "loop:mic"

    public init(speaker: SimulatedSpeaker) {
        self.speaker = speaker
    }

    var deviceDescription: DeviceDescription {
        DeviceDescription(uniqueID: Self.microphoneID, localizedName: "Loopback Microphone (simulated speaker)",
                          modelID: "CaptureKit Loopback", mediaType: .audio, position: .unspecified,
                          formats: [DeviceFormat(formatDescription: .audio(speaker.format))])
    }

    public func discoverDevices() throws(CaptureError) -> [DeviceDescription] { [deviceDescription] }

    public func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        guard uniqueID == Self.microphoneID else { throw .deviceNotFound(uniqueID) }
        return LoopbackMicrophone(description: deviceDescription, speaker: speaker)
    }
}

final class LoopbackMicrophone: DriverDevice {
    let description: DeviceDescription
    let speaker: SimulatedSpeaker

    init(description: DeviceDescription, speaker: SimulatedSpeaker) {
        self.description = description
        self.speaker = speaker
    }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        guard configuration.format.audioFormat == speaker.format else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(LoopbackDriver.microphoneID)")
        }
        return LoopbackStream(speaker: speaker, framesPerBuffer: configuration.audioFramesPerBuffer, pace: configuration.pace)
    }
}

final class LoopbackStream: DriverStream {
    private let speaker: SimulatedSpeaker
    private let framesPerBuffer: Int
    private let pace: CapturePace
    private let stopSignal = StopSignal()
    private let state = Locked<(next: Int, anchor: MediaTime)>((0, .zero))

    init(speaker: SimulatedSpeaker, framesPerBuffer: Int, pace: CapturePace) {
        self.speaker = speaker
        self.framesPerBuffer = framesPerBuffer
        self.pace = pace
    }

    func start(at hostTime: MediaTime) throws(CaptureError) { state.withLock { $0 = (0, hostTime) } }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        let format = speaker.format
        let rate = Int32(format.sampleRate)
        let (first, anchor) = state.withLock { s in
            defer { s.next += framesPerBuffer }
            return (s.next, s.anchor)
        }
        let pts = anchor + MediaTime(value: Int64(first), timescale: rate)
        let duration = MediaTime(value: Int64(framesPerBuffer), timescale: rate)
        if pace == .realtime {
            guard stopSignal.sleep(untilHostTime: pts + duration) else { return nil }
        }
        guard let samples = speaker.read(first: first, count: framesPerBuffer, stop: stopSignal) else { return nil }
        let buffer = AudioPCMBuffer(format: format, frameCapacity: framesPerBuffer)
        buffer.withProducerBytes { raw in samples.withUnsafeBytes { raw.copyMemory(from: $0) } }
        return SampleBuffer(payload: .audio(buffer), formatDescription: .audio(format),
                            presentationTime: pts, duration: duration, sequenceNumber: Int64(first))
    }

    func stop() { stopSignal.stop() }
}
