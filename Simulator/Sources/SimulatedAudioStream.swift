import CaptureCore
import Foundation

/// Tone buffers: PTS exactly `firstSample / sampleRate` (plus the start time in real time).
final class SimulatedAudioStream: DriverStream {
    private let format: AudioStreamFormat
    private let generator: ToneGenerator
    private let framesPerBuffer: Int
    private let pace: CapturePace
    private let uniqueID: String
    private let scenario: SimulatorScenario
    private let stopSignal = StopSignal()
    private let state = Locked<(next: Int64, anchor: MediaTime)>((0, .zero))

    private let dataSources: [Int: ToneGenerator]
    private let defaultDataSource: Int?

    init(format: AudioStreamFormat, generator: ToneGenerator, framesPerBuffer: Int, pace: CapturePace,
         uniqueID: String, scenario: SimulatorScenario, dataSources: [Int: ToneGenerator] = [:], defaultDataSource: Int? = nil) {
        self.dataSources = dataSources
        self.defaultDataSource = defaultDataSource
        self.format = format
        self.generator = generator
        self.framesPerBuffer = framesPerBuffer
        self.pace = pace
        self.uniqueID = uniqueID
        self.scenario = scenario
    }

    /// What the scenario's `FaultTimeline` has done to this stream: its clock's zero, and the
    /// drifting sample clock (sample `n` ≥ `driftStart` carries the scene's sample
    /// `contentBase + (n − driftStart) / (1 + ppm·10⁻⁶)`).
    private struct AudioFaultState {
        var origin = MediaTime.zero
        var registered = false
        var driftPPM = 0.0
        var driftStart: Int64 = 0
        var contentBase: Int64 = 0

        func content(_ n: Int64) -> Int64 {
            guard driftPPM != 0 else { return contentBase + n - driftStart }
            return contentBase + Int64((Double(n - driftStart) / (1 + driftPPM / 1_000_000)).rounded())
        }
    }
    private let timeline = Locked(AudioFaultState())

    func start(at hostTime: MediaTime) throws(CaptureError) {
        state.withLock { $0 = (0, hostTime) }
        let origin = scenario.faultClock(startingAt: hostTime, device: uniqueID)
        timeline.withLock { $0 = AudioFaultState(origin: origin, registered: true) }
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        if stopSignal.isStopped { return nil }
        guard scenario.isPluggedIn(uniqueID) else { throw .deviceDisconnected(uniqueID) }
        let rate = Int32(format.sampleRate)
        // The fault timeline's events due at this buffer: a gap skips samples (the PTS jumps and the
        // buffer reports them lost), a drift bends the sample clock, actions fire.
        var skipped: Int64 = 0
        let (next, anchorNow) = state.withLock { ($0.next, $0.anchor) }
        let origin = timeline.withLock { $0.origin }
        let startTime = anchorNow + MediaTime(value: next, timescale: rate)
        for (number, event) in scenario.takeDueFaults(device: uniqueID, elapsed: startTime - origin, frame: nil) {
            switch event.fault {
            case .audioGap(let milliseconds): skipped += Int64(milliseconds) * Int64(rate) / 1000
            case .clockDrift(let ppm):
                timeline.withLock { t in
                    let at = next + skipped
                    t.contentBase = t.content(at)
                    t.driftStart = at
                    t.driftPPM = ppm
                }
            default:
                if let wait = scenario.perform(number, event, pace: pace), wait.waitUntilApplied(or: stopSignal) { return nil }
            }
        }
        guard scenario.isPluggedIn(uniqueID) else { throw .deviceDisconnected(uniqueID) }
        let (first, anchor) = state.withLock { s in
            s.next += skipped
            defer { s.next += Int64(framesPerBuffer) }
            return (s.next, s.anchor)
        }
        let clock = timeline.withLock { $0 }
        let pts = anchor + MediaTime(value: first, timescale: rate)
        let duration = MediaTime(value: Int64(framesPerBuffer), timescale: rate)
        if pace == .realtime {
            guard stopSignal.sleep(untilHostTime: pts + duration) else { return nil }
        }
        let buffer = AudioPCMBuffer(format: format, frameCapacity: framesPerBuffer)
        // The data source selected now and the gain stage, as the audio session set them.
        let settings = scenario.microphoneSettings(uniqueID)
        let generator = (settings.dataSourceID ?? defaultDataSource).flatMap { dataSources[$0] } ?? self.generator
        let gain = settings.gain
        let drifting = clock.driftPPM != 0
        buffer.withProducerBytes { raw in
            switch format.sampleFormat {
            case .float32:
                let out = raw.baseAddress!.assumingMemoryBound(to: Float.self)
                if drifting {
                    for n in 0..<framesPerBuffer {
                        let v = generator.sample(clock.content(first + Int64(n)))
                        for c in 0..<format.channelCount { out[n * format.channelCount + c] = v }
                    }
                } else {
                    generator.fill(out, first: clock.content(first), count: framesPerBuffer, channels: format.channelCount)
                }
                if gain != 1 { for i in 0..<(framesPerBuffer * format.channelCount) { out[i] *= gain } }
            case .int16:
                let out = raw.baseAddress!.assumingMemoryBound(to: Int16.self)
                for n in 0..<framesPerBuffer {
                    let v = Int16(max(-32768, min(32767, (generator.sample(clock.content(first + Int64(n))) * gain * 32767).rounded())))
                    for c in 0..<format.channelCount { out[n * format.channelCount + c] = v }
                }
            }
        }
        return SampleBuffer(payload: .audio(buffer), formatDescription: .audio(format),
                            presentationTime: pts, duration: duration, sequenceNumber: first,
                            discontinuity: skipped > 0 ? Discontinuity(count: Int(skipped), reason: .discontinuity) : nil)
    }

    func stop() {
        stopSignal.stop()
        if timeline.withLock({ s in defer { s.registered = false }; return s.registered }) { scenario.streamStopped(device: uniqueID) }
    }
}
