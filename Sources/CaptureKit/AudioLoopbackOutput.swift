import CaptureALSA
import CaptureCore

/// A capture output that writes every audio buffer it receives to an `AudioOutputSink` — an ALSA
/// playback PCM for the virtual microphone (`capture simulate --microphone sim:mic --audio-to
/// hw:Loopback,0,0`: any ALSA program hears it on `hw:Loopback,1,0`), or a `SimulatedSpeaker`.
///
/// Buffers are written on the delivery thread as they arrive: in a real-time session the
/// simulator delivers each buffer when it is due and the card's clock takes them at its rate. The
/// samples are converted to float32 and to the sink's channel count (mono is copied to every
/// channel; more channels are mixed down by averaging).
///
/// `statistics` counts like `VideoLoopbackOutput`: buffers and frames written, frames the
/// microphone lost before they reached the output, late writes (a buffer written more than one
/// buffer duration behind the schedule set by the first buffer; real time only) and the sink's
/// underruns (the card ran dry and was recovered). The first write error (an unplugged card) stops
/// the output and is kept in `statistics.error`.
public final class AudioLoopbackOutput: CaptureOutput {
    public struct Statistics: Sendable, Equatable {
        public var buffersWritten = 0
        public var framesWritten = 0
        /// Frames the microphone reported lost before they reached this output.
        public var framesDropped = 0
        /// Buffers written more than one buffer duration behind schedule.
        public var lateWrites = 0
        /// Underruns the playback device recovered from (ALSA sinks).
        public var underruns = 0
        /// Sequence numbers (first sample index for the simulator) of the first and last buffer written.
        public var firstSequenceNumber: Int64?
        public var lastSequenceNumber: Int64?
        public var error: CaptureError?
    }

    public let attachment = OutputAttachment()
    public let sink: any AudioOutputSink
    private let state = Locked(State())

    private struct State {
        var statistics = Statistics()
        var origin: (host: MediaTime, pts: MediaTime)?
        var began = false
    }

    public init(sink: any AudioOutputSink) {
        self.sink = sink
    }

    public func accepts(_ mediaType: MediaType) -> Bool { mediaType == .audio }

    public var demand: OutputDemand { state.withLock { $0.statistics.error == nil ? .ready : .idle } }

    public var statistics: Statistics {
        var stats = state.withLock { $0.statistics }
        if let alsa = sink as? ALSAPlaybackDevice { stats.underruns = alsa.underrunCount }
        return stats
    }

    public func sessionDidStop() {
        let began = state.withLock { s -> Bool in
            defer { s.began = false; s.origin = nil }
            return s.began
        }
        if began { sink.endPlayback() }
    }

    public func didDrop(_ gap: Discontinuity, before sample: SampleBuffer, from connection: CaptureConnection) {
        state.withLock { $0.statistics.framesDropped += gap.count }
    }

    /// Interleaved samples in the sink's channel count.
    private func converted(_ buffer: AudioPCMBuffer) -> [Float] {
        let input = buffer.floatSamples()
        let from = buffer.format.channelCount, to = sink.format.channelCount
        guard from != to else { return input }
        let frames = buffer.frameLength
        var out = [Float](repeating: 0, count: frames * to)
        for f in 0..<frames {
            if from == 1 {
                for c in 0..<to { out[f * to + c] = input[f] }
            } else {
                var sum: Float = 0
                for c in 0..<from { sum += input[f * from + c] }
                let value = sum / Float(from)
                for c in 0..<to { out[f * to + c] = value }
            }
        }
        return out
    }

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        guard let buffer = sample.audioBuffer else { return }
        let proceed = state.withLock { s -> Bool? in
            guard s.statistics.error == nil else { return nil }
            defer { s.began = true }
            return s.began
        }
        guard let alreadyBegan = proceed else { return }
        var failure: CaptureError?
        do throws(CaptureError) {
            if buffer.format.sampleRate != sink.format.sampleRate {
                throw .formatNotSupported("the microphone runs at \(buffer.format.sampleRate) Hz, \(sink.uniqueID) at \(sink.format.sampleRate) Hz")
            }
            if !alreadyBegan { try sink.beginPlayback() }
            try sink.write(converted(buffer))
        } catch {
            failure = error
        }
        let now = HostClock.now()
        let realtime = attachment.pace == .realtime
        state.withLock { s in
            if let failure {
                s.statistics.error = failure
                return
            }
            s.statistics.buffersWritten += 1
            s.statistics.framesWritten += buffer.frameLength
            if s.statistics.firstSequenceNumber == nil { s.statistics.firstSequenceNumber = sample.sequenceNumber }
            s.statistics.lastSequenceNumber = sample.sequenceNumber
            guard realtime else { return }
            guard let origin = s.origin else {
                s.origin = (now, sample.presentationTime)
                return
            }
            let due = origin.host + (sample.presentationTime - origin.pts)
            if sample.duration.isValid, (now - due).seconds > sample.duration.seconds { s.statistics.lateWrites += 1 }
        }
        if failure != nil { attachment.demandChanged() }
    }
}
