import Synchronization

/// A capture device (AVCaptureDevice): a camera or a microphone, whichever backend drives it.
///
/// Device objects are unique per registry: asking twice for the same ID gives the same object, so
/// configuration made through one reference is seen through every other.
public final class CaptureDevice: Sendable, Hashable, CustomStringConvertible {
    public let uniqueID: String
    public let localizedName: String
    public let modelID: String
    public let mediaType: MediaType
    public let position: DeviceDescription.Position
    public let formats: [DeviceFormat]

    private let driver: any CaptureDriver
    private let state: Mutex<State>

    struct State {
        var opened: (any DriverDevice)?
        var activeFormatIndex: Int
        var activeVideoMinFrameDuration: MediaTime
        var isLockedForConfiguration = false
        var isConnected = true
    }

    public init(description: DeviceDescription, driver: any CaptureDriver) {
        uniqueID = description.uniqueID
        localizedName = description.localizedName
        modelID = description.modelID
        mediaType = description.mediaType
        position = description.position
        formats = description.formats
        self.driver = driver
        let index = min(max(description.defaultFormatIndex, 0), max(description.formats.count - 1, 0))
        let duration = description.formats.isEmpty ? MediaTime.invalid
            : (description.formats[index].defaultFrameDuration ?? .invalid)
        state = Mutex(State(activeFormatIndex: index, activeVideoMinFrameDuration: duration))
    }

    public static func == (lhs: CaptureDevice, rhs: CaptureDevice) -> Bool { lhs === rhs }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    public var description: String { "\(localizedName) [\(uniqueID)]" }

    public func hasMediaType(_ type: MediaType) -> Bool { mediaType == type }

    public var isConnected: Bool { state.withLock { $0.isConnected } }

    public var activeFormat: DeviceFormat { state.withLock { formats[$0.activeFormatIndex] } }

    /// The time between frames of a video stream; defaults to the active format's fastest rate.
    public var activeVideoMinFrameDuration: MediaTime { state.withLock { $0.activeVideoMinFrameDuration } }

    // MARK: Configuration

    /// Takes the configuration lock; required before changing the format or frame duration.
    public func lockForConfiguration() throws(CaptureError) {
        try state.withLock { (s: inout State) throws(CaptureError) in
            guard s.isConnected else { throw .deviceDisconnected(uniqueID) }
            s.isLockedForConfiguration = true
        }
    }

    public func unlockForConfiguration() {
        state.withLock { $0.isLockedForConfiguration = false }
    }

    /// Chooses the active format (under the configuration lock); resets the frame duration to the format's default.
    public func setActiveFormat(_ format: DeviceFormat) throws(CaptureError) {
        guard let index = formats.firstIndex(of: format) else {
            throw .formatNotSupported("\(format.formatDescription) is not one of \(uniqueID)'s formats")
        }
        try state.withLock { (s: inout State) throws(CaptureError) in
            guard s.isLockedForConfiguration else {
                throw .invalidState("setActiveFormat on \(uniqueID) without lockForConfiguration()")
            }
            s.activeFormatIndex = index
            s.activeVideoMinFrameDuration = format.defaultFrameDuration ?? .invalid
        }
    }

    /// Sets the frame duration (under the lock); it must lie in one of the active format's ranges.
    /// `MediaTime.invalid` restores the format's default.
    public func setActiveVideoMinFrameDuration(_ duration: MediaTime) throws(CaptureError) {
        try state.withLock { (s: inout State) throws(CaptureError) in
            guard s.isLockedForConfiguration else {
                throw .invalidState("setActiveVideoMinFrameDuration on \(uniqueID) without lockForConfiguration()")
            }
            let format = formats[s.activeFormatIndex]
            if !duration.isValid {
                s.activeVideoMinFrameDuration = format.defaultFrameDuration ?? .invalid
                return
            }
            guard format.supports(frameDuration: duration) else {
                throw .invalidArgument("frame duration \(duration) (\(1 / duration.seconds) fps) is outside the active format's ranges \(format.frameRateRanges)")
            }
            s.activeVideoMinFrameDuration = duration
        }
    }

    /// The best format for a size and rate: exact size, the rate within a range, the given pixel
    /// format when asked for; nil if none fits.
    public func format(matching dimensions: Dimensions?, frameRate: Int?, pixelFormat: PixelFormat? = nil) -> DeviceFormat? {
        formats.first { format in
            if let dimensions, format.dimensions != dimensions { return false }
            if let pixelFormat, format.pixelFormat != pixelFormat { return false }
            if let frameRate, !format.supports(frameDuration: MediaTime(value: 1, timescale: Int32(frameRate))) { return false }
            return true
        }
    }

    // MARK: Driver access (for sessions)

    /// Opens the driver device on first use.
    public func driverDevice() throws(CaptureError) -> any DriverDevice {
        try state.withLock { (s: inout State) throws(CaptureError) -> any DriverDevice in
            guard s.isConnected else { throw .deviceDisconnected(uniqueID) }
            if let opened = s.opened { return opened }
            let opened = try driver.openDevice(uniqueID: uniqueID)
            s.opened = opened
            return opened
        }
    }

    /// Marks the device gone for good (a reconnect is a new device object).
    public func markDisconnected() {
        state.withLock { $0.isConnected = false; $0.opened = nil }
    }
}

/// Finds devices across the registered drivers (AVCaptureDevice.DiscoverySession's engine).
public final class DeviceRegistry: Sendable {
    public let drivers: [any CaptureDriver]
    private let known = Mutex<[String: CaptureDevice]>([:])

    public init(drivers: [any CaptureDriver]) {
        self.drivers = drivers
    }

    /// All devices present now, optionally of one media type, in driver order.
    public func devices(mediaType: MediaType? = nil) throws(CaptureError) -> [CaptureDevice] {
        var result: [CaptureDevice] = []
        for driver in drivers {
            for description in try driver.discoverDevices() where mediaType == nil || description.mediaType == mediaType {
                result.append(device(for: description, driver: driver))
            }
        }
        return result
    }

    /// The device with this unique ID; throws `deviceNotFound` naming it.
    public func device(uniqueID: String) throws(CaptureError) -> CaptureDevice {
        for driver in drivers where uniqueID.hasPrefix(driver.scheme + ":") {
            if let description = try driver.discoverDevices().first(where: { $0.uniqueID == uniqueID }) {
                return device(for: description, driver: driver)
            }
        }
        throw .deviceNotFound(uniqueID)
    }

    /// The first device of a media type (AVCaptureDevice.default(for:)).
    public func defaultDevice(for mediaType: MediaType) -> CaptureDevice? {
        (try? devices(mediaType: mediaType))?.first
    }

    private func device(for description: DeviceDescription, driver: any CaptureDriver) -> CaptureDevice {
        known.withLock { known in
            if let existing = known[description.uniqueID], existing.isConnected { return existing }
            let device = CaptureDevice(description: description, driver: driver)
            known[description.uniqueID] = device
            return device
        }
    }
}
