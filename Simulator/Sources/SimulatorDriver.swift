import CaptureCore
import Synchronization

/// The simulator backend: synthetic cameras and microphones that behave like devices, on a
/// virtual or real-time clock. Everything they produce is a function of (profile, seed, index).
public struct SimulatorDriver: CaptureDriver {
    public let scheme = "sim"
    public let seed: UInt64
    public let profiles: [SimulatedDeviceProfile]

    public init(seed: UInt64 = 0, profiles: [SimulatedDeviceProfile] = SimulatedDeviceProfile.builtIn) {
        self.seed = seed
        self.profiles = profiles
    }

    public func discoverDevices() throws(CaptureError) -> [DeviceDescription] {
        profiles.map(\.deviceDescription)
    }

    public func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        guard let profile = profiles.first(where: { $0.uniqueID == uniqueID }) else { throw .deviceNotFound(uniqueID) }
        return SimulatedDevice(profile: profile, seed: seed)
    }
}

/// An opened simulated device.
final class SimulatedDevice: DriverDevice {
    let profile: SimulatedDeviceProfile
    let seed: UInt64

    init(profile: SimulatedDeviceProfile, seed: UInt64) {
        self.profile = profile
        self.seed = seed
    }

    var description: DeviceDescription { profile.deviceDescription }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        guard description.formats.contains(configuration.format) else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(profile.uniqueID)")
        }
        switch profile.kind {
        case .camera:
            guard let pixelFormat = configuration.format.pixelFormat, let size = configuration.format.dimensions else {
                throw .formatNotSupported("camera stream needs a video format")
            }
            guard configuration.format.supports(frameDuration: configuration.frameDuration) else {
                throw .formatNotSupported("frame duration \(configuration.frameDuration) on \(configuration.format.formatDescription)")
            }
            // The seed is mixed with the device ID so two simulated cameras differ.
            let renderer = try SyntheticFrameRenderer(pixelFormat: pixelFormat, dimensions: size,
                                                      frameDuration: configuration.frameDuration,
                                                      seed: seed ^ Self.hash(profile.uniqueID))
            return SimulatedVideoStream(renderer: renderer, pace: configuration.pace)
        case .microphone(let format, let tone):
            return SimulatedAudioStream(format: format, generator: ToneGenerator(spec: tone, sampleRate: format.sampleRate),
                                        framesPerBuffer: configuration.audioFramesPerBuffer, pace: configuration.pace)
        }
    }

    /// FNV-1a: a stable hash (Swift's Hasher is seeded per process).
    static func hash(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return h
    }
}

/// Frames from a renderer: PTS exactly `n × frameDuration` (plus the start time in real time).
final class SimulatedVideoStream: DriverStream {
    private let renderer: SyntheticFrameRenderer
    private let pace: CapturePace
    private let pool: PixelBufferPool
    private let stopSignal = StopSignal()
    private let state = Mutex<(next: Int64, anchor: MediaTime)>((0, .zero))
    private let format: FormatDescription

    init(renderer: SyntheticFrameRenderer, pace: CapturePace) {
        self.renderer = renderer
        self.pace = pace
        // Bounded like a V4L2 buffer queue: consumers that hold frames starve it (frames then drop).
        pool = PixelBufferPool(format: renderer.pixelFormat, width: renderer.width, height: renderer.height,
                               maximumBufferCount: SimulatedVideoStream.bufferCount)
        format = .video(pixelFormat: renderer.pixelFormat,
                        dimensions: Dimensions(width: renderer.width, height: renderer.height))
    }

    func start(at hostTime: MediaTime) throws(CaptureError) {
        state.withLock { $0 = (0, hostTime) }
    }

    /// Buffers in the stream's pool, as many as a typical V4L2 capture queue.
    static let bufferCount = 8

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        var lost = 0
        while true {
            if stopSignal.isStopped { return nil }
            let (index, anchor) = state.withLock { s in
                defer { s.next += 1 }
                return (s.next, s.anchor)
            }
            let pts = anchor + renderer.frameDuration * index
            if pace == .realtime {
                // A frame is available once it has been "exposed": at its start time plus one frame.
                guard stopSignal.sleep(untilHostTime: pts + renderer.frameDuration) else { return nil }
            }
            guard let buffer = acquireBuffer() else {
                // Every buffer is held by a consumer: this frame is lost, as on a device.
                lost += 1
                continue
            }
            renderer.render(frame: index, into: buffer)
            return SampleBuffer(payload: .pixels(buffer), formatDescription: format,
                                presentationTime: pts, duration: renderer.frameDuration, sequenceNumber: index,
                                discontinuity: lost > 0 ? Discontinuity(count: lost, reason: .outOfBuffers) : nil)
        }
    }

    /// Real time: a buffer now or the frame is lost. Virtual time: wait up to one second of wall
    /// time for a consumer to release one (well-behaved consumers never lose frames), then give up.
    private func acquireBuffer() -> PixelBuffer? {
        if let buffer = pool.makeBuffer() { return buffer }
        guard pace == .virtual else { return nil }
        let deadline = HostClock.now() + MediaTime(value: 1, timescale: 1)
        while HostClock.now() < deadline, !stopSignal.isStopped {
            if let buffer = pool.makeBuffer() { return buffer }
            _ = stopSignal.sleep(untilHostTime: HostClock.now() + MediaTime(value: 1, timescale: 1000))
        }
        return nil
    }

    func stop() { stopSignal.stop() }
}

/// Tone buffers: PTS exactly `firstSample / sampleRate` (plus the start time in real time).
final class SimulatedAudioStream: DriverStream {
    private let format: AudioStreamFormat
    private let generator: ToneGenerator
    private let framesPerBuffer: Int
    private let pace: CapturePace
    private let stopSignal = StopSignal()
    private let state = Mutex<(next: Int64, anchor: MediaTime)>((0, .zero))

    init(format: AudioStreamFormat, generator: ToneGenerator, framesPerBuffer: Int, pace: CapturePace) {
        self.format = format
        self.generator = generator
        self.framesPerBuffer = framesPerBuffer
        self.pace = pace
    }

    func start(at hostTime: MediaTime) throws(CaptureError) {
        state.withLock { $0 = (0, hostTime) }
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        if stopSignal.isStopped { return nil }
        let rate = Int32(format.sampleRate)
        let (first, anchor) = state.withLock { s in
            defer { s.next += Int64(framesPerBuffer) }
            return (s.next, s.anchor)
        }
        let pts = anchor + MediaTime(value: first, timescale: rate)
        let duration = MediaTime(value: Int64(framesPerBuffer), timescale: rate)
        if pace == .realtime {
            guard stopSignal.sleep(untilHostTime: pts + duration) else { return nil }
        }
        let buffer = AudioPCMBuffer(format: format, frameCapacity: framesPerBuffer)
        buffer.withMutableBytes { raw in
            switch format.sampleFormat {
            case .float32:
                generator.fill(raw.baseAddress!.assumingMemoryBound(to: Float.self), first: first,
                               count: framesPerBuffer, channels: format.channelCount)
            case .int16:
                let out = raw.baseAddress!.assumingMemoryBound(to: Int16.self)
                for n in 0..<framesPerBuffer {
                    let v = Int16(max(-32768, min(32767, (generator.sample(first + Int64(n)) * 32767).rounded())))
                    for c in 0..<format.channelCount { out[n * format.channelCount + c] = v }
                }
            }
        }
        return SampleBuffer(payload: .audio(buffer), formatDescription: .audio(format),
                            presentationTime: pts, duration: duration, sequenceNumber: first)
    }

    func stop() { stopSignal.stop() }
}
