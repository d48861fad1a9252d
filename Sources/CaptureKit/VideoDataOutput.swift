import CaptureCore
import CaptureMedia
import Dispatch

/// Receives frames from a video data output (AVCaptureVideoDataOutputSampleBufferDelegate).
/// Callbacks run on the queue given with the delegate, one at a time. In real time the output's own
/// delivery thread enters that queue (`sync`), so a callback usually runs on that thread, which
/// preempts the encoder sooner when a frame is due; in virtual pace they are queued with `async`.
public protocol VideoDataOutputSampleBufferDelegate: AnyObject, Sendable {
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection)
    /// Frames that were not delivered: once per dropped frame, with the reason.
    func dataOutput(_ output: VideoDataOutput, didDrop reason: DropReason, presentationTime: MediaTime, from connection: CaptureConnection)
}

extension VideoDataOutputSampleBufferDelegate {
    public func dataOutput(_ output: VideoDataOutput, didDrop reason: DropReason, presentationTime: MediaTime, from connection: CaptureConnection) {}
}

/// Delivers video frames to a delegate and as an AsyncSequence (AVCaptureVideoDataOutput).
///
/// - `videoSettings` picks the delivered pixel format and size (converted with libswscale when the
///   device's differs); the connection's rotation and mirroring are applied to the pixels.
/// - `alwaysDiscardsLateVideoFrames` (default true): a frame arriving while the delegate is still
///   busy is dropped with `lateData`. When false, up to `maximumQueuedFrames` wait in a queue; past
///   that the frames are dropped with `outOfBuffers` (the queue holds device buffers, so a longer
///   queue would starve the device's pool — which then drops frames as `outOfBuffers` itself).
/// - In virtual pace nothing is dropped: the session waits while the consumer is busy.
/// - A consumer that keeps sample buffers after its callback keeps their pool buffers out; once
///   the device's pool is exhausted the device drops frames (`outOfBuffers`, reported here) until
///   buffers come back — in real time and in virtual time alike.
public final class VideoDataOutput: CaptureOutput {
    public struct VideoSettings: Sendable, Hashable {
        /// nil = the device's format.
        public var pixelFormat: PixelFormat?
        /// nil = the device's size (before rotation).
        public var dimensions: Dimensions?
        public init(pixelFormat: PixelFormat? = nil, dimensions: Dimensions? = nil) {
            self.pixelFormat = pixelFormat
            self.dimensions = dimensions
        }
    }

    public let attachment = OutputAttachment()
    private let state = Locked(State())
    private let feeds = SampleBufferFeeds()
    private let transformer = Locked(FrameTransformer())
    private let deliveryThread = DeliveryThread(name: "CaptureKit.VideoDataOutput.delivery")

    private struct State {
        var settings = VideoSettings()
        var alwaysDiscardsLateVideoFrames = true
        var maximumQueuedFrames = 4
        var delegate: (any VideoDataOutputSampleBufferDelegate)?
        var queue: DispatchQueue?
        var inFlight = 0
        var delivered = 0
        var drops: [DropReason: Int] = [:]
    }

    public init() {}

    public func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }

    public var videoSettings: VideoSettings {
        get { state.withLock { $0.settings } }
        set { state.withLock { $0.settings = newValue } }
    }

    /// The formats `videoSettings.pixelFormat` may name.
    public var availableVideoPixelFormats: [PixelFormat] { [.nv12, .yuv420, .yuyv, .rgb24] }

    public var alwaysDiscardsLateVideoFrames: Bool {
        get { state.withLock { $0.alwaysDiscardsLateVideoFrames } }
        set { state.withLock { $0.alwaysDiscardsLateVideoFrames = newValue } }
    }

    /// Queue depth when late frames are kept (`alwaysDiscardsLateVideoFrames == false`).
    public var maximumQueuedFrames: Int {
        get { state.withLock { $0.maximumQueuedFrames } }
        set { state.withLock { $0.maximumQueuedFrames = max(1, newValue) } }
    }

    /// Sets the delegate and the queue its callbacks run on (serial; one callback at a time).
    public func setSampleBufferDelegate(_ delegate: (any VideoDataOutputSampleBufferDelegate)?, queue: DispatchQueue?) {
        state.withLock {
            $0.delegate = delegate
            $0.queue = delegate == nil ? nil : (queue ?? DispatchQueue(label: "CaptureKit.VideoDataOutput"))
        }
        attachment.demandChanged()
    }

    /// Frames as an AsyncSequence. It keeps at most `maximumQueuedFrames` unread frames; in real
    /// time, frames it cannot take count as `lateData` drops; in virtual time the session waits.
    public func sampleBuffers() -> SampleBufferSequence {
        feeds.makeSequence(limit: maximumQueuedFrames) { [weak self] in self?.attachment.demandChanged() }
    }

    /// Frames delivered and dropped so far, by reason.
    public var deliveredFrameCount: Int { state.withLock { $0.delivered } }
    public var droppedFrameCounts: [DropReason: Int] { state.withLock { $0.drops } }

    public var demand: OutputDemand {
        state.withLock { s in
            guard s.delegate != nil || !feeds.isEmpty else { return .idle }
            // Virtual pace: back-pressure instead of drops.
            let limit = s.alwaysDiscardsLateVideoFrames ? 1 : s.maximumQueuedFrames
            let ready = s.inFlight < limit && feeds.allUnread(below: s.maximumQueuedFrames)
            return ready ? .ready : .busy
        }
    }

    public func sessionDidStop() {}

    public func didDrop(_ gap: Discontinuity, before sample: SampleBuffer, from connection: CaptureConnection) {
        for _ in 0..<gap.count { reportDrop(gap.reason, at: sample.presentationTime, connection) }
    }

    public func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        enum Decision { case deliver, drop(DropReason), ignore }
        let decision: Decision = state.withLock { s in
            guard s.delegate != nil || !feeds.isEmpty else { return .ignore }
            if attachment.pace == .realtime {
                if s.alwaysDiscardsLateVideoFrames && s.inFlight > 0 { return .drop(.lateData) }
                if !s.alwaysDiscardsLateVideoFrames && s.inFlight >= s.maximumQueuedFrames { return .drop(.outOfBuffers) }
            }
            return .deliver
        }
        switch decision {
        case .ignore: return
        case .drop(let reason): reportDrop(reason, at: sample.presentationTime, connection)
        case .deliver:
            let settings = videoSettings
            let delivered: SampleBuffer
            do {
                delivered = try transformer.withLock { t throws(CaptureError) in
                    try t.transform(sample, settings: settings, angle: connection.videoRotationAngle,
                                    mirrored: connection.isVideoMirrored)
                }
            } catch {
                reportDrop(.discontinuity, at: sample.presentationTime, connection)
                return
            }
            dispatch(delivered, connection)
        }
    }

    private func dispatch(_ sample: SampleBuffer, _ connection: CaptureConnection) {
        let (delegate, queue, readers) = state.withLock { s in
            s.inFlight += s.delegate == nil ? 0 : 1
            s.delivered += 1
            return (s.delegate, s.queue, self.feeds.all)
        }
        for feed in readers where !feed.yield(sample) {
            reportDrop(.lateData, at: sample.presentationTime, connection, countOnly: true)
        }
        guard let delegate, let queue else { return }
        deliver(on: queue) {
            delegate.dataOutput(self, didOutput: sample, from: connection)
            self.state.withLock { $0.inFlight -= 1 }
            self.attachment.demandChanged()
        }
    }

    /// Real time: through the output's delivery thread (see `DeliveryThread`); virtual pace, where
    /// nothing waits on the clock: straight onto the queue.
    private func deliver(on queue: DispatchQueue, _ callback: @escaping @Sendable () -> Void) {
        if attachment.pace == .realtime {
            deliveryThread.enqueue { queue.sync(execute: callback) }
        } else {
            queue.async(execute: callback)
        }
    }

    private func reportDrop(_ reason: DropReason, at pts: MediaTime, _ connection: CaptureConnection, countOnly: Bool = false) {
        let (delegate, queue) = state.withLock { s in
            s.drops[reason, default: 0] += 1
            return (s.delegate, s.queue)
        }
        guard !countOnly, let delegate, let queue else { return }
        deliver(on: queue) { delegate.dataOutput(self, didDrop: reason, presentationTime: pts, from: connection) }
    }
}

/// Converts, resizes, rotates and mirrors frames for a data output, reusing its buffers.
struct FrameTransformer: ~Copyable {
    private var converter: PixelConverter?
    private var convertedPool: PixelBufferPool?
    private var rotatedPool: PixelBufferPool?

    mutating func transform(_ sample: SampleBuffer, settings: VideoDataOutput.VideoSettings, angle: Int,
                            mirrored: Bool) throws(CaptureError) -> SampleBuffer {
        guard let pixels = sample.pixelBuffer else { return sample }
        let sourceSize = Dimensions(width: pixels.width, height: pixels.height)
        let format = settings.pixelFormat ?? pixels.format
        let size = settings.dimensions ?? sourceSize
        var current = pixels
        if format != pixels.format || size != sourceSize {
            // Rotation works on YUV planes: convert to the target format unless it is packed.
            if converter?.source.format != pixels.format || converter?.source.dimensions != sourceSize
                || converter?.destination.format != format || converter?.destination.dimensions != size {
                converter = try PixelConverter(from: pixels.format, sourceSize, to: format, size)
                convertedPool = PixelBufferPool(format: format, width: size.width, height: size.height)
            }
            guard let out = convertedPool?.makeBuffer() else { throw .invalidState("conversion pool exhausted") }
            try converter!.convert(pixels, into: out)
            current = out
        }
        if angle != 0 || mirrored {
            let rotated = PixelRotator.rotatedDimensions(Dimensions(width: current.width, height: current.height), angle: angle)
            if rotatedPool?.format != current.format || rotatedPool?.width != rotated.width || rotatedPool?.height != rotated.height {
                rotatedPool = PixelBufferPool(format: current.format, width: rotated.width, height: rotated.height)
            }
            guard let out = rotatedPool?.makeBuffer() else { throw .invalidState("rotation pool exhausted") }
            try PixelRotator.rotate(current, angle: angle, mirrored: mirrored, into: out)
            current = out
        }
        if current === pixels { return sample }
        return SampleBuffer(payload: .pixels(current),
                            formatDescription: .video(pixelFormat: current.format,
                                                      dimensions: Dimensions(width: current.width, height: current.height)),
                            presentationTime: sample.presentationTime, duration: sample.duration,
                            sequenceNumber: sample.sequenceNumber, discontinuity: sample.discontinuity)
    }
}
