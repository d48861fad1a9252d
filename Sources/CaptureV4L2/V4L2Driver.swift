import CaptureCore
import Foundation

/// The V4L2 camera backend: every single-planar streaming capture node under /dev, identified by
/// its node path (`/dev/video0`), so `capture record --camera /dev/video0` names it directly.
///
/// Discovery runs on every call, so nodes that appear or vanish (hot-plug) show up the next time
/// devices are listed. Nodes that cannot be opened are left out; opening one by ID reports why.
/// Drops and unplugs are posted to `events`, this driver instance's own center (a registry holding
/// the driver forwards them to its `driverEvents`).
public struct V4L2Driver: EventReportingDriver {
    /// Unique IDs are node paths, so the scheme is their common prefix.
    public let scheme = "/dev/video"
    public let events = DeviceEventCenter()
    let system: any V4L2System

    /// The driver over the real kernel.
    public init() { self.init(system: LinuxV4L2System()) }

    /// A driver over another `V4L2System` (host tests stand a fake kernel in).
    init(system: any V4L2System) {
        self.system = system
    }

    public func discoverDevices() throws(CaptureError) -> [DeviceDescription] {
        system.deviceNodes().compactMap { path in try? V4L2Node.open(path, system: system).description }
    }

    public func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        let node = try V4L2Node.open(uniqueID, system: system)
        return V4L2Device(node: node, events: events)
    }
}

/// An open file descriptor on a capture node with what QUERYCAP and enumeration said.
/// Owned by exactly one `V4L2Device` (or a discovery pass) and closed in `deinit`.
final class V4L2Node: Sendable {
    // Immutable after init; the descriptor itself is used from the device's callers and its
    // stream, and the kernel serialises ioctls on it.
    let path: String
    let fd: V4L2FileDescriptor
    let system: any V4L2System
    let capabilities: V4L2CapabilityFlags
    let description: DeviceDescription

    private init(path: String, fd: V4L2FileDescriptor, system: any V4L2System, capabilities: V4L2CapabilityFlags,
                 description: DeviceDescription) {
        self.path = path
        self.fd = fd
        self.system = system
        self.capabilities = capabilities
        self.description = description
    }

    deinit { system.close(fd) }

    static func open(_ path: String, system: any V4L2System) throws(CaptureError) -> V4L2Node {
        let fd: V4L2FileDescriptor
        do {
            fd = try system.open(path)
        } catch {
            switch error {
            case .accessDenied, .notPermitted: throw .deviceAccessDenied(path)
            case .noSuchFile, .noDevice, .noSuchDeviceOrAddress: throw .deviceNotFound(path)
            // A driver that allows one opener at a time, and another process has it.
            case .busy: throw .deviceInUse(path)
            default: throw .deviceNotFound("\(path) (\(error))")
            }
        }
        let cap: V4L2Capability
        do { cap = try system.queryCapability(fd) } catch {
            system.close(fd)
            throw .deviceNotFound("\(path) (not a V4L2 device)")
        }
        let caps = cap.effective
        guard V4L2Formats.isVideoCapture(caps) else {
            system.close(fd)
            throw .deviceNotFound("\(path) (not a video capture node)")
        }
        let formats = V4L2Formats.enumerate(system, fd: fd)
        let card = cap.card, driver = cap.driver, bus = cap.busInfo
        let description = DeviceDescription(
            uniqueID: path, localizedName: card.isEmpty ? path : card, modelID: "\(driver) \(bus)",
            mediaType: .video, position: .external, formats: formats,
            defaultFormatIndex: V4L2Formats.currentFormatIndex(system, fd: fd, formats: formats))
        return V4L2Node(path: path, fd: fd, system: system, capabilities: caps, description: description)
    }

    var supportsFrameDuration: Bool { (try? system.getParameters(fd, type: .videoCapture))?.canSetTimePerFrame ?? false }
}

/// An opened camera: its controls and configuration priority, and the one stream it runs at a time.
final class V4L2Device: DriverDevice {
    let node: V4L2Node
    let mappings: [V4L2ControlMapping]
    /// The driver's event center.
    let events: DeviceEventCenter
    private let state = Locked(State())

    struct State {
        var disconnected = false
        var streaming = false
    }

    init(node: V4L2Node, events: DeviceEventCenter) {
        self.node = node
        self.events = events
        mappings = V4L2ControlMapping.map(V4L2ControlMapping.query(node.system, fd: node.fd))
    }

    var description: DeviceDescription { node.description }
    var uniqueID: String { node.path }

    var isDisconnected: Bool { state.withLock { $0.disconnected } }

    func markDisconnected() {
        let first = state.withLock { s -> Bool in
            defer { s.disconnected = true }
            return !s.disconnected
        }
        if first { events.post(.disconnected(deviceID: uniqueID)) }
    }

    /// Claims the device for a stream (one at a time).
    func beginStreaming() throws(CaptureError) {
        try state.withLock { (s: inout State) throws(CaptureError) in
            guard !s.disconnected else { throw .deviceDisconnected(uniqueID) }
            guard !s.streaming else { throw .invalidState("\(uniqueID) is already streaming") }
            s.streaming = true
        }
    }

    func endStreaming() { state.withLock { $0.streaming = false } }

    /// Maps an errno from a configuration ioctl to the error the device model promises.
    func failure(_ code: V4L2Errno, _ what: String) -> CaptureError {
        if code.meansDeviceGone { return disconnected() }
        switch code {
        case .busy: return .lockedByAnotherClient(device: uniqueID, holder: "another process (V4L2 record priority)")
        case .accessDenied, .notPermitted: return .invalidArgument("\(what) on \(uniqueID) is not permitted (read-only or inactive control)")
        default: return .invalidArgument("\(what) on \(uniqueID) failed: \(code)")
        }
    }

    /// Marks the device gone and returns the error its calls end with.
    func disconnected() -> CaptureError {
        markDisconnected()
        return .deviceDisconnected(uniqueID)
    }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        guard !isDisconnected else { throw .deviceDisconnected(uniqueID) }
        guard configuration.pace == .realtime else {
            throw .unsupportedPace("\(uniqueID) is a real camera and delivers in real time; use CaptureSession(pace: .realtime)")
        }
        guard description.formats.contains(configuration.format), let pixelFormat = configuration.format.pixelFormat,
              let size = configuration.format.dimensions else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(uniqueID)")
        }
        return V4L2Stream(device: self, pixelFormat: pixelFormat, size: size, frameDuration: configuration.frameDuration)
    }

    // MARK: Controls

    var controls: [ControlDescription] { mappings.map(\.description) }

    private func mapping(_ id: ControlID) throws(CaptureError) -> V4L2ControlMapping {
        guard let m = mappings.first(where: { $0.id == id }) else { throw .invalidArgument("\(uniqueID) has no control \(id)") }
        return m
    }

    func value(of control: ControlID) throws(CaptureError) -> ControlValue {
        let m = try mapping(control)
        if m.isButton { return .bool(false) }
        let raw: Int32
        do { raw = try node.system.getControl(node.fd, id: m.info.cid) } catch { throw failure(error, "reading \(control)") }
        return try m.value(fromRaw: Int64(raw))
    }

    func setValue(_ value: ControlValue, for control: ControlID) throws(CaptureError) {
        guard !isDisconnected else { throw .deviceDisconnected(uniqueID) }
        let m = try mapping(control)
        let raw = try m.raw(from: value)
        if m.isButton && raw == 0 { return }
        do { try node.system.setControl(node.fd, id: m.info.cid, value: Int32(clamping: raw)) } catch {
            throw failure(error, "setting \(control) to \(value)")
        }
    }

    // MARK: Configuration priority

    func acquireConfigurationPriority() throws(CaptureError) {
        do { try node.system.setPriority(node.fd, .record) } catch { throw failure(error, "VIDIOC_S_PRIORITY(RECORD)") }
    }

    func releaseConfigurationPriority() {
        try? node.system.setPriority(node.fd, .default)
    }
}
