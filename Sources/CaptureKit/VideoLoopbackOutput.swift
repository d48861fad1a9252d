import CaptureCore
import CaptureV4L2

/// A capture output that writes every video frame it receives to a `V4L2LoopbackSink`, so a
/// session's camera — typically a simulated one, stamp and sync markers included — appears to
/// other programs as the v4l2loopback camera behind the sink.
///
/// Frames are written on the delivery thread as they arrive: in a real-time session the camera
/// paces them (the simulator delivers each frame when it is due), which is what readers of a
/// camera expect; in a virtual-time session they go out as fast as they are made. Frames of another
/// format or size are converted by the sink.
///
/// `statistics` counts frames written, frames the camera lost before they reached the output
/// (its discontinuities), and late writes: frames written more than one frame duration behind
/// the schedule set by the first frame (real time only). The first write error stops the output
/// (later frames are ignored) and is kept in `statistics.error`.
public final class VideoLoopbackOutput: CaptureOutput {
    public struct Statistics: Sendable, Equatable {
        public var framesWritten = 0
        /// Frames the camera reported lost before they reached this output.
        public var framesDropped = 0
        /// Frames written more than one frame duration behind schedule.
        public var lateWrites = 0
        /// Sequence numbers (frame indices for the simulator) of the first and last frame written.
        public var firstSequenceNumber: Int64?
        public var lastSequenceNumber: Int64?
        /// The write error that stopped the output, if any.
        public var error: CaptureError?
    }

    public let attachment = OutputAttachment()
    public let sink: V4L2LoopbackSink
    private let state = Locked(State())

    private struct State {
        var statistics = Statistics()
        /// (host time, PTS) of the first frame: the schedule later frames are measured against.
        var origin: (host: MediaTime, pts: MediaTime)?
    }

    public init(sink: V4L2LoopbackSink) {
        self.sink = sink
    }

    public func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }

    public var demand: OutputDemand { state.withLock { $0.statistics.error == nil ? .ready : .idle } }

    public var statistics: Statistics { state.withLock { $0.statistics } }

    public func sessionDidStop() {}

    public func didDrop(_ gap: Discontinuity, before sample: SampleBuffer, from connection: CaptureConnection) {
        state.withLock { $0.statistics.framesDropped += gap.count }
    }

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pixels = sample.pixelBuffer, state.withLock({ $0.statistics.error == nil }) else { return }
        let failure: CaptureError?
        do throws(CaptureError) {
            try sink.write(pixels)
            failure = nil
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
            s.statistics.framesWritten += 1
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
