import Synchronization

/// Why a session was interrupted (AVCaptureSession.InterruptionReason).
public enum InterruptionReason: String, Sendable, Hashable, Codable {
    case videoDeviceNotAvailableInBackground
    case audioDeviceInUseByAnotherClient
    case videoDeviceInUseByAnotherClient
    case videoDeviceNotAvailableWithMultipleForegroundApps
    case videoDeviceNotAvailableDueToSystemPressure
}

/// Process-wide availability of device objects. A backend (or a simulator fault, or a test) marks
/// a device unavailable with a reason; sessions using it are interrupted and resume when it comes
/// back. Keyed by device object, so separate registries (separate simulators) never interfere.
public final class DeviceAvailability: Sendable {
    public static let shared = DeviceAvailability()

    public enum Change: Sendable {
        case unavailable(CaptureDevice, reason: InterruptionReason)
        case available(CaptureDevice)
    }

    private let unavailable = Locked<[ObjectIdentifier: InterruptionReason]>([:])
    private let changes = EventBroadcaster<Change>()
    private let observers = Locked<[Int: @Sendable (Change) -> Void]>([:])
    private let nextObserver = Atomic<Int>(0)

    public init() {}

    public func reason(for device: CaptureDevice) -> InterruptionReason? {
        unavailable.withLock { $0[ObjectIdentifier(device)] }
    }

    public func markUnavailable(_ device: CaptureDevice, reason: InterruptionReason) {
        unavailable.withLock { $0[ObjectIdentifier(device)] = reason }
        notify(.unavailable(device, reason: reason))
    }

    public func markAvailable(_ device: CaptureDevice) {
        let was = unavailable.withLock { $0.removeValue(forKey: ObjectIdentifier(device)) }
        if was != nil { notify(.available(device)) }
    }

    /// Changes as an AsyncSequence.
    public func changeStream() -> AsyncStream<Change> { changes.subscribe() }

    /// Synchronous observation (sessions use this); returns a token for `removeObserver`.
    public func addObserver(_ body: @escaping @Sendable (Change) -> Void) -> Int {
        let id = nextObserver.wrappingAdd(1, ordering: .relaxed).oldValue
        observers.withLock { $0[id] = body }
        return id
    }

    public func removeObserver(_ token: Int) {
        _ = observers.withLock { $0.removeValue(forKey: token) }
    }

    private func notify(_ change: Change) {
        changes.send(change)
        for observer in observers.withLock({ Array($0.values) }) { observer(change) }
    }
}

/// A driver that reports its devices becoming unavailable to this process (another client took
/// them: `reason`) and available again (nil). A `DeviceRegistry` turns these into
/// `DeviceAvailability` changes of its device objects, which interrupt and resume the sessions
/// using them. The simulator's `FaultTimeline` interruptions arrive this way.
public protocol AvailabilityReportingDriver: CaptureDriver {
    func addAvailabilityHandler(_ handler: @escaping @Sendable (_ uniqueID: String, _ reason: InterruptionReason?) -> Void)
}
