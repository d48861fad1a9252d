import CaptureCore
import Dispatch

/// Receives audio from an audio data output (AVCaptureAudioDataOutputSampleBufferDelegate).
public protocol AudioDataOutputSampleBufferDelegate: AnyObject, Sendable {
    func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection)
    /// The device lost audio frames (an ALSA overrun, say): `gap.count` frames, just before the
    /// sample at `presentationTime` (the next `didOutput`). Once per loss, not once per frame;
    /// in order with `didOutput` on the delegate's queue. AVFoundation's audio delegate has no
    /// such callback; the default does nothing.
    func dataOutput(_ output: AudioDataOutput, didDrop gap: Discontinuity, presentationTime: MediaTime, from connection: CaptureConnection)
}

extension AudioDataOutputSampleBufferDelegate {
    public func dataOutput(_ output: AudioDataOutput, didDrop gap: Discontinuity, presentationTime: MediaTime, from connection: CaptureConnection) {}
}

/// Delivers audio buffers to a delegate on its queue and as an AsyncSequence (AVCaptureAudioDataOutput).
/// Audio is never discarded for lateness: buffers queue on the delegate's queue in order.
public final class AudioDataOutput: CaptureOutput {
    public let attachment = OutputAttachment()
    private let state = Locked(State())
    private let feeds = SampleBufferFeeds()

    private struct State {
        var delegate: (any AudioDataOutputSampleBufferDelegate)?
        var queue: DispatchQueue?
        var inFlight = 0
    }

    /// Virtual pace waits while this many buffers are queued for the delegate.
    public static let virtualQueueLimit = 8

    public init() {}

    public func accepts(_ mediaType: MediaType) -> Bool { mediaType == .audio }

    public func setSampleBufferDelegate(_ delegate: (any AudioDataOutputSampleBufferDelegate)?, queue: DispatchQueue?) {
        state.withLock {
            $0.delegate = delegate
            $0.queue = delegate == nil ? nil : (queue ?? DispatchQueue(label: "CaptureKit.AudioDataOutput"))
        }
        attachment.demandChanged()
    }

    /// Audio buffers as an AsyncSequence. It holds up to `streamLimit` unread buffers (about
    /// 5 s at 1024 frames and 48 kHz); virtual time waits for the reader, real time never should.
    public func sampleBuffers() -> SampleBufferSequence {
        feeds.makeSequence(limit: Self.streamLimit) { [weak self] in self?.attachment.demandChanged() }
    }

    public static let streamLimit = 256

    public var demand: OutputDemand {
        state.withLock { s in
            guard s.delegate != nil || !feeds.isEmpty else { return .idle }
            let ready = s.inFlight < Self.virtualQueueLimit && feeds.allUnread(below: Self.virtualQueueLimit)
            return ready ? .ready : .busy
        }
    }

    public func sessionDidStop() {}

    public func didDrop(_ gap: Discontinuity, before sample: SampleBuffer, from connection: CaptureConnection) {
        let (delegate, queue) = state.withLock { ($0.delegate, $0.queue) }
        guard let delegate, let queue else { return }
        let pts = sample.presentationTime
        queue.async { delegate.dataOutput(self, didDrop: gap, presentationTime: pts, from: connection) }
    }

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let (delegate, queue, readers) = state.withLock { s in
            s.inFlight += s.delegate == nil ? 0 : 1
            return (s.delegate, s.queue, self.feeds.all)
        }
        for feed in readers { feed.yield(sample) }
        guard let delegate, let queue else { return }
        queue.async {
            delegate.dataOutput(self, didOutput: sample, from: connection)
            self.state.withLock { $0.inFlight -= 1 }
            self.attachment.demandChanged()
        }
    }
}
