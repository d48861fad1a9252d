
/// Why a device lost samples.
public enum SampleDropReason: String, Sendable, Hashable, CustomStringConvertible {
    /// The device skipped frames: a gap in its sequence numbers (AVCaptureOutput's `.discontinuity`).
    case discontinuity
    /// Frames arrived but were unusable (a V4L2 buffer flagged as an error, a corrupt MJPEG image).
    case corruptData
    /// The capture buffer overflowed before the samples were read (an ALSA overrun); the gap was
    /// filled with silence so the timeline stays continuous.
    case overrun

    public var description: String { rawValue }
}

/// Something a real device reported while streaming: drops and disconnection. The driver SPI's
/// `nextSample()` only carries samples and errors, so backends post these here.
public enum DriverEvent: Sendable, Hashable {
    /// `count` samples (video frames or audio frames) were lost around `presentationTime`.
    case samplesDropped(deviceID: String, reason: SampleDropReason, count: Int, presentationTime: MediaTime)
    /// The device went away (unplugged, driver unbound); its streams end with `deviceDisconnected`.
    case disconnected(deviceID: String)

    public var deviceID: String {
        switch self {
        case .samplesDropped(let id, _, _, _), .disconnected(let id): return id
        }
    }
}

/// Where backends report `DriverEvent`s: subscribers get them as an AsyncSequence, and running
/// totals per device and reason can be read at any time (for summaries and tests).
public final class DeviceEventCenter: Sendable {
    /// The process-wide center every backend posts to.
    public static let shared = DeviceEventCenter()

    private let broadcaster = EventBroadcaster<DriverEvent>()
    private let totals = Locked<[String: [SampleDropReason: Int]]>([:])
    private let disconnectedIDs = Locked<Set<String>>([])

    public init() {}

    public func post(_ event: DriverEvent) {
        switch event {
        case .samplesDropped(let id, let reason, let count, _):
            totals.withLock { $0[id, default: [:]][reason, default: 0] += count }
        case .disconnected(let id):
            _ = disconnectedIDs.withLock { $0.insert(id) }
        }
        broadcaster.send(event)
    }

    /// Every event posted from now on.
    public func events() -> AsyncStream<DriverEvent> { broadcaster.subscribe() }

    /// Samples dropped so far by a device for a reason (all reasons when nil).
    public func droppedCount(deviceID: String, reason: SampleDropReason? = nil) -> Int {
        totals.withLock { all in
            let mine = all[deviceID] ?? [:]
            if let reason { return mine[reason] ?? 0 }
            return mine.values.reduce(0, +)
        }
    }

    /// True once a device has reported its disconnection.
    public func hasDisconnected(deviceID: String) -> Bool { disconnectedIDs.withLock { $0.contains(deviceID) } }

    /// Forgets a device's totals (e.g. before a new measurement, or when a node is reused).
    public func reset(deviceID: String) {
        _ = totals.withLock { $0.removeValue(forKey: deviceID) }
        _ = disconnectedIDs.withLock { $0.remove(deviceID) }
    }
}
