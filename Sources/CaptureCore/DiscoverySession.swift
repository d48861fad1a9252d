/// A device appearing or going away (AVCaptureDeviceWasConnected / WasDisconnected notifications).
public enum DeviceEvent: Sendable {
    case connected(CaptureDevice)
    case disconnected(CaptureDevice)

    public var device: CaptureDevice {
        switch self {
        case .connected(let d), .disconnected(let d): return d
        }
    }
}

/// What a hot-plug capable driver reports.
public enum HotPlugEvent: Sendable {
    case added(DeviceDescription)
    case removed(uniqueID: String)
}

/// A driver whose devices can come and go while the process runs.
public protocol HotPlugDriver: CaptureDriver {
    /// Adds a handler called on every add/remove (from any thread).
    func addHotPlugHandler(_ handler: @escaping @Sendable (HotPlugEvent) -> Void)
}

/// Finds devices by type, media type and position (AVCaptureDevice.DiscoverySession); its device
/// list follows hot-plug.
public final class DiscoverySession: Sendable {
    public let deviceTypes: [DeviceType]
    public let mediaType: MediaType?
    /// `.unspecified` matches every position.
    public let position: DeviceDescription.Position
    public let registry: DeviceRegistry

    /// `deviceTypes` must not be empty (a programmer error, as in AVFoundation).
    public init(deviceTypes: [DeviceType], mediaType: MediaType?, position: DeviceDescription.Position,
                registry: DeviceRegistry) throws(CaptureError) {
        guard !deviceTypes.isEmpty else {
            throw .invalidArgument("a discovery session needs at least one device type (e.g. .builtInWideAngleCamera)")
        }
        self.deviceTypes = deviceTypes
        self.mediaType = mediaType
        self.position = position
        self.registry = registry
    }

    public func matches(_ device: CaptureDevice) -> Bool {
        deviceTypes.contains(device.deviceType)
            && (mediaType == nil || device.mediaType == mediaType)
            && (position == .unspecified || device.position == position)
    }

    /// The matching devices connected now, in driver order.
    public var devices: [CaptureDevice] {
        ((try? registry.devices()) ?? []).filter(matches)
    }

    /// The device list again after every connect or disconnect that concerns this session
    /// (the first element is the list now).
    public func deviceUpdates() -> AsyncStream<[CaptureDevice]> {
        let (stream, continuation) = AsyncStream<[CaptureDevice]>.makeStream(bufferingPolicy: .bufferingNewest(64))
        continuation.yield(devices)
        // The list is taken when the event happens, not when a consumer gets to it.
        let token = registry.addDeviceObserver { [self] event in
            if matches(event.device) { continuation.yield(devices) }
        }
        let registry = self.registry
        continuation.onTermination = { _ in registry.removeDeviceObserver(token) }
        return stream
    }
}
