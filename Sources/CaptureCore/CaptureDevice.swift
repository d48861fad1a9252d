import Foundation

/// A capture device (AVCaptureDevice): a camera or a microphone, whichever backend drives it.
///
/// Device objects are unique per registry: asking twice for the same ID gives the same object, so
/// configuration made through one reference is seen through every other.
///
/// Controls are data at the driver level (`DriverControls.swift`); this facade maps AVFoundation's
/// properties onto them, validates values against the active format (a bad value, an unsupported
/// mode or a change without the configuration lock is a programmer error: a distinct thrown
/// `CaptureError`, never a crash), and turns the driver's per-frame reports into completion
/// handlers and observable values tagged with the PTS at which they took effect.
///
/// This file holds the device's state, its configuration lock and driver access; the rest of
/// AVCaptureDevice's surface is in `CaptureDevice+Formats` (formats, frame durations, live
/// reconfiguration, stabilization), `+Controls` (controls as data, reports, observation), `+Focus`,
/// `+Exposure`, `+WhiteBalance` and `+TorchAndZoom`. Every member reads and writes the one `state`
/// under the one lock (`Locked`). The registry and the observer list live in their own files.
public final class CaptureDevice: Sendable, Hashable, CustomStringConvertible {
    public let uniqueID: String
    public let localizedName: String
    public let modelID: String
    public let mediaType: MediaType
    public let position: DeviceDescription.Position
    public let deviceType: DeviceType
    public let formats: [DeviceFormat]

    let driver: any CaptureDriver
    /// The driver that made this device (a simulator's carries its scenario, e.g. its fault timeline).
    public var backingDriver: any CaptureDriver { driver }
    let state: Locked<State>
    let observers = ControlObservers()
    let subjectAreaEvents = EventBroadcaster<MediaTime>()
    let stabilization = Locked<[ObjectIdentifier: VideoStabilizationMode]>([:])
    /// Running streams of this device (sessions register them): format and frame-duration changes
    /// reach them while they run.
    let liveStreams = Locked<(next: Int, handlers: [Int: LiveStreamHandler], published: Int)>((0, [:], 0))
    /// Receives a change for one running stream; throws when the stream cannot take it.
    public typealias LiveStreamHandler = @Sendable (StreamReconfiguration) throws(CaptureError) -> Void
    /// Completion handlers run here, one at a time, in the order they were registered.
    let callbackQueue: DispatchQueue

    struct State {
        var opened: (any DriverDevice)?
        var activeFormatIndex: Int
        var activeVideoMinFrameDuration: MediaTime
        var activeVideoMaxFrameDuration: MediaTime
        var isConnected = true
        var pending: [(revision: UInt64, handler: @Sendable (MediaTime) -> Void)] = []
        var lastReported: [ControlID: ControlValue] = [:]
    }

    /// Sentinels that keep the current value (AVCaptureLensPositionCurrent, AVCaptureExposureDurationCurrent,
    /// AVCaptureISOCurrent, AVCaptureMaxAvailableTorchLevel).
    public static let currentLensPosition = Double.greatestFiniteMagnitude
    public static let currentExposureDuration = MediaTime.invalid
    public static let currentISO = 0.0
    public static let torchLevelMaximumAvailable = Double.greatestFiniteMagnitude

    public init(description: DeviceDescription, driver: any CaptureDriver) {
        uniqueID = description.uniqueID
        localizedName = description.localizedName
        modelID = description.modelID
        mediaType = description.mediaType
        position = description.position
        deviceType = description.deviceType
        formats = description.formats
        self.driver = driver
        callbackQueue = DispatchQueue(label: "CaptureKit.device.\(description.uniqueID)")
        let index = min(max(description.defaultFormatIndex, 0), max(description.formats.count - 1, 0))
        let duration = description.formats.isEmpty ? MediaTime.invalid
            : (description.formats[index].defaultFrameDuration ?? .invalid)
        state = Locked(State(activeFormatIndex: index, activeVideoMinFrameDuration: duration, activeVideoMaxFrameDuration: duration))
    }

    public static func == (lhs: CaptureDevice, rhs: CaptureDevice) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public var description: String { "\(localizedName) [\(uniqueID)]" }

    public func hasMediaType(_ type: MediaType) -> Bool { mediaType == type }

    public var isConnected: Bool { state.withLock { $0.isConnected } }

    public var activeFormat: DeviceFormat { state.withLock { formats[$0.activeFormatIndex] } }

    /// The shortest time between frames (the highest rate); streams run at this duration.
    /// Defaults to the active format's default (30 fps where it allows it).
    public var activeVideoMinFrameDuration: MediaTime { state.withLock { $0.activeVideoMinFrameDuration } }
    /// The longest time between frames (the lowest rate).
    public var activeVideoMaxFrameDuration: MediaTime { state.withLock { $0.activeVideoMaxFrameDuration } }

    // MARK: Configuration lock

    /// Who holds each device's configuration lock, process-wide and by unique ID, so every device
    /// object for one device (from any registry or session) shares one lock.
    /// `holder`: the opened driver device whose handle took the driver's priority. Two device objects
    /// for one device (two registries) each open their own handle; the priority goes back through
    /// the handle that took it, whichever object unlocks last.
    private struct LockEntry { var owner: CaptureDeviceClient; var depth: Int; var holder: any DriverDevice }
    private static let locks = Locked<[String: LockEntry]>([:])

    private var lockOwner: CaptureDeviceClient? { Self.locks.withLock { $0[uniqueID]?.owner } }

    /// True while some client holds the configuration lock.
    public var isLockedForConfiguration: Bool { lockOwner != nil }

    /// The client holding the configuration lock, if any.
    public var configurationLockHolder: CaptureDeviceClient? { lockOwner }

    /// Takes the configuration lock for `client` (nested calls by the same client count). Throws
    /// `lockedByAnotherClient` when another client of this process, or another process (through the
    /// driver's configuration priority), holds it.
    public func lockForConfiguration(client: CaptureDeviceClient = .shared) throws(CaptureError) {
        try state.withLock { (s: inout State) throws(CaptureError) in
            guard s.isConnected else { throw .deviceDisconnected(uniqueID) }
            let driver = try openLocked(&s)
            try Self.locks.withLock { (locks: inout [String: LockEntry]) throws(CaptureError) in
                if let entry = locks[uniqueID] {
                    guard entry.owner === client else { throw .lockedByAnotherClient(device: uniqueID, holder: entry.owner.name) }
                    locks[uniqueID]?.depth += 1
                    return
                }
                try driver.acquireConfigurationPriority()
                locks[uniqueID] = LockEntry(owner: client, depth: 1, holder: driver)
            }
        }
    }

    /// Releases one level of `client`'s lock; the driver's priority goes with the last one.
    /// Unlocking a lock the client does not hold does nothing.
    public func unlockForConfiguration(client: CaptureDeviceClient = .shared) {
        Self.locks.withLock { locks in
            guard let entry = locks[uniqueID], entry.owner === client else { return }
            if entry.depth > 1 {
                locks[uniqueID]?.depth -= 1
                return
            }
            // The driver's priority goes before the entry does, under the same lock: another
            // device object for this device (its own file handle) that finds no entry must also
            // find the priority free, or V4L2 refuses it with EBUSY as if another process held it.
            entry.holder.releaseConfigurationPriority()
            locks[uniqueID] = nil
        }
    }

    /// Setters check that the device is locked (by a client of this process), as AVFoundation
    /// checks that the calling app holds the lock.
    func requireLock(_ s: State, _ operation: String) throws(CaptureError) {
        guard s.isConnected else { throw .deviceDisconnected(uniqueID) }
        guard lockOwner != nil else { throw .notLockedForConfiguration(device: uniqueID, operation: operation) }
    }

    // MARK: Driver access (for sessions)

    /// Opens the driver device on first use.
    public func driverDevice() throws(CaptureError) -> any DriverDevice {
        try state.withLock { (s: inout State) throws(CaptureError) -> any DriverDevice in try openLocked(&s) }
    }

    func openLocked(_ s: inout State) throws(CaptureError) -> any DriverDevice {
        guard s.isConnected else { throw .deviceDisconnected(uniqueID) }
        if let opened = s.opened { return opened }
        let opened = try driver.openDevice(uniqueID: uniqueID)
        if let reporting = opened as? any ControlReportingDevice {
            reporting.setControlReportHandler { [weak self] report in self?.handle(report) }
        }
        s.opened = opened
        return opened
    }

    /// Marks the device gone for good (a reconnect is a new device object).
    public func markDisconnected() {
        let opened = state.withLock { s -> (any DriverDevice)? in
            s.isConnected = false
            defer { s.opened = nil }
            return s.opened
        }
        // The device is gone: so is the lock taken through this object's handle (a reconnected
        // device starts unlocked). A lock taken through another object's handle stays: another
        // registry's object is told of its own unplug, and a simulated camera unplugged in one
        // scenario must not unlock the same ID in another (parallel tests did exactly that).
        Self.locks.withLock { locks in
            if let entry = locks[uniqueID], let opened, entry.holder === opened { locks[uniqueID] = nil }
        }
        (opened as? any ControlReportingDevice)?.setControlReportHandler(nil)
        observers.finishAll()
    }
}
