
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
/// `nextSample()` carries samples (with the losses before them, `SampleBuffer.discontinuity`) and
/// errors; backends also post these to their driver's `DeviceEventCenter` for running totals.
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

/// A driver whose devices report `DriverEvent`s (the V4L2 and ALSA backends). Each driver instance
/// has its own center; a `DeviceRegistry` forwards the events of its drivers to its own
/// `driverEvents`, so two registries (or two tests) never see each other's events.
public protocol EventReportingDriver: CaptureDriver {
    /// Where this driver's devices post their events.
    var events: DeviceEventCenter { get }
}

/// Where backends report `DriverEvent`s: subscribers get them as an AsyncSequence or through a
/// synchronous observer, and running totals per device and reason can be read at any time (for
/// summaries and tests). One per driver instance and one per registry; there is no process-wide one.
public final class DeviceEventCenter: Sendable {
    private let broadcaster = EventBroadcaster<DriverEvent>()
    private let totals = Locked<[String: [SampleDropReason: Int]]>([:])
    private let disconnectedIDs = Locked<Set<String>>([])
    private let observers = Locked<(next: Int, handlers: [Int: @Sendable (DriverEvent) -> Void])>((0, [:]))

    public init() {}

    public func post(_ event: DriverEvent) {
        switch event {
        case .samplesDropped(let id, let reason, let count, _):
            totals.withLock { $0[id, default: [:]][reason, default: 0] += count }
        case .disconnected(let id):
            _ = disconnectedIDs.withLock { $0.insert(id) }
        }
        for handler in observers.withLock({ $0.handlers.sorted { $0.key < $1.key }.map(\.value) }) { handler(event) }
        broadcaster.send(event)
    }

    /// Every event posted from now on.
    public func events() -> AsyncStream<DriverEvent> { broadcaster.subscribe() }

    /// Calls `handler` synchronously on the posting thread (a device's streaming thread: keep it
    /// short) for every event from now on; returns a token for `removeObserver`.
    public func addObserver(_ handler: @escaping @Sendable (DriverEvent) -> Void) -> Int {
        observers.withLock { o in
            defer { o.next += 1 }
            o.handlers[o.next] = handler
            return o.next
        }
    }

    public func removeObserver(_ token: Int) {
        _ = observers.withLock { $0.handlers.removeValue(forKey: token) }
    }

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
