import Foundation

/// Finds devices across the registered drivers (AVCaptureDevice.DiscoverySession's engine) and
/// keeps one device object per connected device; hot-plug drivers' adds and removes become
/// `DeviceEvent`s, and what its drivers' devices report while streaming (drops, disconnection)
/// reaches `driverEvents`.
public final class DeviceRegistry: Sendable {
    public let drivers: [any CaptureDriver]
    /// The `DriverEvent`s of this registry's drivers (those that are `EventReportingDriver`s), and
    /// only theirs: each registry has its own center.
    public let driverEvents = DeviceEventCenter()
    /// The forwarding observers on the drivers' centers, removed when the registry goes.
    private let forwarding: [(center: DeviceEventCenter, token: Int)]
    private let known = Locked<[String: CaptureDevice]>([:])
    private let events = EventBroadcaster<DeviceEvent>()
    private let observers = Locked<(next: Int, handlers: [Int: @Sendable (DeviceEvent) -> Void])>((0, [:]))
    /// The `AudioSession` over this registry, if one was made (its current input is the default microphone).
    let audioSessionLink = Locked(AudioSessionLink())

    public init(drivers: [any CaptureDriver]) {
        self.drivers = drivers
        let mine = driverEvents
        forwarding = drivers.compactMap { driver in
            guard let reporting = driver.asEventReporting else { return nil }
            return (reporting.events, reporting.events.addObserver { [weak mine] event in mine?.post(event) })
        }
        for (index, driver) in drivers.enumerated() {
            guard let hotPlug = driver.asHotPlug else { continue }
            // The handler must not hold the driver: the driver keeps its handlers (the simulator's
            // scenario does), and driver → handler → driver was a cycle that leaked both
            // (LeakSanitizer, ci/sanitize).
            hotPlug.addHotPlugHandler { [weak self] event in
                guard let self else { return }
                self.handle(event, from: self.drivers[index])
            }
        }
        for driver in drivers {
            guard let reporting = driver.asAvailabilityReporting else { continue }
            // A device taken by another client (or given back) interrupts (resumes) the sessions
            // using this registry's object for it.
            reporting.addAvailabilityHandler { [weak self] uniqueID, reason in
                guard let self, let device = self.known.withLock({ $0[uniqueID] }) else { return }
                if let reason {
                    DeviceAvailability.shared.markUnavailable(device, reason: reason)
                } else {
                    DeviceAvailability.shared.markAvailable(device)
                }
            }
        }
    }

    deinit {
        for (center, token) in forwarding { center.removeObserver(token) }
    }

    /// All devices present now, optionally of one media type, in driver order.
    public func devices(mediaType: MediaType? = nil) throws(CaptureError) -> [CaptureDevice] {
        var result: [CaptureDevice] = []
        for driver in drivers {
            for description in try driver.discoverDevices() where mediaType == nil || description.mediaType == mediaType {
                result.append(device(for: description, driver: driver).device)
            }
        }
        return result
    }

    /// The device with this unique ID; throws `deviceNotFound` naming it.
    public func device(uniqueID: String) throws(CaptureError) -> CaptureDevice {
        for driver in drivers where driver.owns(uniqueID: uniqueID) {
            if let description = try driver.lookUpDevice(uniqueID: uniqueID) {
                return device(for: description, driver: driver).device
            }
        }
        throw .deviceNotFound(uniqueID)
    }

    /// The first device of a media type (AVCaptureDevice.default(for:)).
    public func defaultDevice(for mediaType: MediaType) -> CaptureDevice? {
        if mediaType == .audio, let session = audioSessionLink.withLock({ $0.session }), let device = session.currentInputDevice() {
            return device  // follows the audio session's preferred input
        }
        return (try? devices(mediaType: mediaType))?.first
    }

    /// The first device of a type, media type and position (AVCaptureDevice.default(_:for:position:)).
    public func defaultDevice(deviceType: DeviceType, mediaType: MediaType?, position: DeviceDescription.Position) -> CaptureDevice? {
        (try? DiscoverySession(deviceTypes: [deviceType], mediaType: mediaType, position: position, registry: self))?.devices.first
    }

    /// Connected/disconnected notifications as an AsyncSequence.
    public func deviceEvents() -> AsyncStream<DeviceEvent> { events.subscribe() }

    private func device(for description: DeviceDescription, driver: any CaptureDriver) -> (device: CaptureDevice, isNew: Bool) {
        known.withLock { known in
            if let existing = known[description.uniqueID], existing.isConnected { return (existing, false) }
            let device = CaptureDevice(description: description, driver: driver)
            known[description.uniqueID] = device
            return (device, true)
        }
    }

    /// Calls `handler` synchronously on the thread that reports each connect/disconnect (after the
    /// registry has applied it); returns a token for `removeDeviceObserver`.
    public func addDeviceObserver(_ handler: @escaping @Sendable (DeviceEvent) -> Void) -> Int {
        observers.withLock { o in
            defer { o.next += 1 }
            o.handlers[o.next] = handler
            return o.next
        }
    }

    public func removeDeviceObserver(_ token: Int) {
        _ = observers.withLock { $0.handlers.removeValue(forKey: token) }
    }

    private func handle(_ event: HotPlugEvent, from driver: any CaptureDriver) {
        let deviceEvent: DeviceEvent
        switch event {
        case .added(let description):
            let (device, isNew) = device(for: description, driver: driver)
            guard isNew else { return }
            deviceEvent = .connected(device)
        case .removed(let uniqueID):
            guard let device = known.withLock({ $0[uniqueID] }), device.isConnected else { return }
            device.markDisconnected()
            deviceEvent = .disconnected(device)
        }
        for handler in observers.withLock({ $0.handlers.sorted { $0.key < $1.key }.map(\.value) }) { handler(deviceEvent) }
        events.send(deviceEvent)
    }

    /// Whether `device` is this registry's object for its ID (the audio session's governance check).
    func holds(_ device: CaptureDevice) -> Bool {
        known.withLock { $0[device.uniqueID] === device }
    }
}
