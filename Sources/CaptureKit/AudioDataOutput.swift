import CaptureCore
import Dispatch
import Synchronization

/// Receives audio from an audio data output (AVCaptureAudioDataOutputSampleBufferDelegate).
public protocol AudioDataOutputSampleBufferDelegate: AnyObject, Sendable {
    func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection)
}

/// Delivers audio buffers to a delegate on its queue and as an AsyncSequence (AVCaptureAudioDataOutput).
/// Audio is never discarded for lateness: buffers queue on the delegate's queue in order.
public final class AudioDataOutput: CaptureOutput {
    public let attachment = OutputAttachment()
    private let state = Mutex(State())

    private struct State {
        var delegate: (any AudioDataOutputSampleBufferDelegate)?
        var queue: DispatchQueue?
        var feeds: [Int: SampleBufferSequence.Feed] = [:]
        var nextStreamID = 0
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
        let id = state.withLock { s -> Int in
            s.nextStreamID += 1
            return s.nextStreamID
        }
        let (sequence, feed) = SampleBufferSequence.make(
            limit: Self.streamLimit,
            onRead: { [weak self] in self?.attachment.demandChanged() },
            onTermination: { [weak self] in
                _ = self?.state.withLock { $0.feeds.removeValue(forKey: id) }
                self?.attachment.demandChanged()
            })
        state.withLock { $0.feeds[id] = feed }
        attachment.demandChanged()
        return sequence
    }

    public static let streamLimit = 256

    public var demand: OutputDemand {
        state.withLock { s in
            guard s.delegate != nil || !s.feeds.isEmpty else { return .idle }
            let ready = s.inFlight < Self.virtualQueueLimit && s.feeds.values.allSatisfy { $0.unreadCount < Self.virtualQueueLimit }
            return ready ? .ready : .busy
        }
    }

    public func sessionDidStop() {}

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let (delegate, queue, feeds) = state.withLock { s in
            s.inFlight += s.delegate == nil ? 0 : 1
            return (s.delegate, s.queue, Array(s.feeds.values))
        }
        for feed in feeds { feed.yield(sample) }
        guard let delegate, let queue else { return }
        queue.async {
            delegate.dataOutput(self, didOutput: sample, from: connection)
            self.state.withLock { $0.inFlight -= 1 }
            self.attachment.demandChanged()
        }
    }
}
