import Foundation

/// Who holds a device's configuration lock.
///
/// AVFoundation's "client" is an app; inside one process CaptureKit makes it explicit: a client is
/// an object identity. Code that does not care uses `CaptureDeviceClient.shared` (the default of
/// every lock call), so a whole process behaves as one client, like an app. Code that wants two
/// independent parties in one process (two sessions driven by unrelated components, tests) gives
/// each its own client; then `lockForConfiguration(client:)` from one while the other holds the
/// lock throws `lockedByAnotherClient`. Other processes are kept out by the driver
/// (`acquireConfigurationPriority`, V4L2's S_PRIORITY).
public final class CaptureDeviceClient: Sendable, CustomStringConvertible {
    public let name: String
    public init(name: String) { self.name = name }
    /// The process's default client.
    public static let shared = CaptureDeviceClient(name: "this process")
    public var description: String { name }
}

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
/// (Over 500 lines, on purpose: this is AVCaptureDevice's whole surface — lock, formats, focus,
/// exposure, white balance, torch, zoom — and every member reads and writes the one private `state`
/// under the one lock (`Locked`); split across files that state would have to become visible module-wide.
/// The registry and the observer list live in their own files.)
public final class CaptureDevice: Sendable, Hashable, CustomStringConvertible {
    public let uniqueID: String
    public let localizedName: String
    public let modelID: String
    public let mediaType: MediaType
    public let position: DeviceDescription.Position
    public let deviceType: DeviceType
    public let formats: [DeviceFormat]

    private let driver: any CaptureDriver
    /// The driver that made this device (a simulator's carries its scenario, e.g. its fault timeline).
    public var backingDriver: any CaptureDriver { driver }
    private let state: Locked<State>
    private let observers = ControlObservers()
    private let subjectAreaEvents = EventBroadcaster<MediaTime>()
    private let stabilization = Locked<[ObjectIdentifier: VideoStabilizationMode]>([:])
    /// Running streams of this device (sessions register them): format and frame-duration changes
    /// reach them while they run.
    private let liveStreams = Locked<(next: Int, handlers: [Int: LiveStreamHandler], published: Int)>((0, [:], 0))
    /// Receives a change for one running stream; throws when the stream cannot take it.
    public typealias LiveStreamHandler = @Sendable (StreamReconfiguration) throws(CaptureError) -> Void
    /// Completion handlers run here, one at a time, in the order they were registered.
    private let callbackQueue: DispatchQueue

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
    private func requireLock(_ s: State, _ operation: String) throws(CaptureError) {
        guard s.isConnected else { throw .deviceDisconnected(uniqueID) }
        guard lockOwner != nil else { throw .notLockedForConfiguration(device: uniqueID, operation: operation) }
    }

    // MARK: Formats and frame durations

    /// Chooses the active format (under the configuration lock); resets both frame durations to
    /// the format's default and clamps the zoom factor to the new format's maximum. While the device
    /// streams, the change reaches the stream at its next frame boundary (no `stopRunning` needed);
    /// `completion` gets the PTS of the first frame delivered with it (`.invalid` when not streaming).
    public func setActiveFormat(_ format: DeviceFormat, completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard let index = formats.firstIndex(of: format) else {
            throw .formatNotSupported("\(format.formatDescription) is not one of \(uniqueID)'s formats")
        }
        let previous = try state.withLock { (s: inout State) throws(CaptureError) -> State in
            try requireLock(s, "setActiveFormat")
            let previous = s
            s.activeFormatIndex = index
            s.activeVideoMinFrameDuration = format.defaultFrameDuration ?? .invalid
            s.activeVideoMaxFrameDuration = format.defaultFrameDuration ?? .invalid
            if mediaType == .video, let driver = try? openLocked(&s),
               let zoom = try? driver.value(of: .zoomFactor).doubleValue, zoom > format.videoMaxZoomFactor {
                try driver.setValue(.real(format.videoMaxZoomFactor), for: .zoomFactor)
            }
            return previous
        }
        try publishStreamChange(restoring: previous, completion: completion)
    }

    /// Sets the shortest frame duration (under the lock). It must lie in one of the active
    /// format's ranges; `MediaTime.invalid` restores the default. A value above the current
    /// maximum raises the maximum with it.
    public func setActiveVideoMinFrameDuration(_ duration: MediaTime,
                                               completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        try setFrameDuration(duration, isMinimum: true, completion: completion)
    }

    /// Sets the longest frame duration (under the lock), validated like the minimum. A value below
    /// the current minimum lowers the minimum with it (so "set max, then min" recipes work).
    public func setActiveVideoMaxFrameDuration(_ duration: MediaTime,
                                               completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        try setFrameDuration(duration, isMinimum: false, completion: completion)
    }

    /// Frame durations, like formats, reach a running stream at its next frame boundary; the stream
    /// runs at `activeVideoMinFrameDuration` (the highest rate the app allows).
    private func setFrameDuration(_ duration: MediaTime, isMinimum: Bool,
                                  completion: (@Sendable (MediaTime) -> Void)?) throws(CaptureError) {
        let name = isMinimum ? "activeVideoMinFrameDuration" : "activeVideoMaxFrameDuration"
        let previous = try state.withLock { (s: inout State) throws(CaptureError) -> State in
            try requireLock(s, "set \(name)")
            let previous = s
            let format = formats[s.activeFormatIndex]
            guard duration.isValid else {
                let fallback = format.defaultFrameDuration ?? .invalid
                if isMinimum {
                    s.activeVideoMinFrameDuration = fallback
                    if s.activeVideoMaxFrameDuration < fallback { s.activeVideoMaxFrameDuration = fallback }
                } else {
                    s.activeVideoMaxFrameDuration = fallback
                    if s.activeVideoMinFrameDuration > fallback { s.activeVideoMinFrameDuration = fallback }
                }
                return previous
            }
            guard duration.isNumeric, duration.value > 0, format.supports(frameDuration: duration) else {
                throw .valueOutOfRange(control: name, value: "\(duration) (\(Self.fps(duration)) fps)",
                                       allowed: format.frameRateRanges.map(\.description).joined(separator: ", "))
            }
            if isMinimum {
                s.activeVideoMinFrameDuration = duration
                if s.activeVideoMaxFrameDuration < duration { s.activeVideoMaxFrameDuration = duration }
            } else {
                s.activeVideoMaxFrameDuration = duration
                if s.activeVideoMinFrameDuration > duration { s.activeVideoMinFrameDuration = duration }
            }
            return previous
        }
        try publishStreamChange(restoring: previous, completion: completion)
    }

    // MARK: Live reconfiguration

    /// Registers a running stream of this device (sessions do, for each stream they start); the
    /// handler receives every later format or frame-duration change. Returns a token for
    /// `removeLiveStream`.
    public func addLiveStream(_ handler: @escaping LiveStreamHandler) -> Int {
        liveStreams.withLock { l in
            defer { l.next += 1 }
            l.handlers[l.next] = handler
            return l.next
        }
    }

    public func removeLiveStream(_ token: Int) {
        _ = liveStreams.withLock { $0.handlers.removeValue(forKey: token) }
    }

    /// True while some session streams from this device.
    public var isStreaming: Bool { liveStreams.withLock { !$0.handlers.isEmpty } }

    /// Sends the active format and frame duration to every running stream. A stream that refuses
    /// them (a format the backend cannot switch to) restores the previous settings and throws.
    private func publishStreamChange(restoring previous: State, completion: (@Sendable (MediaTime) -> Void)?) throws(CaptureError) {
        let (format, duration) = state.withLock { (formats[$0.activeFormatIndex], $0.activeVideoMinFrameDuration) }
        let (handlers, generation) = liveStreams.withLock { l in
            l.published += 1
            return (Array(l.handlers.values), l.published)
        }
        guard mediaType == .video, !handlers.isEmpty else {
            if let completion { callbackQueue.async { completion(.invalid) } }
            return
        }
        let fired = Locked(false)
        let change = StreamReconfiguration(format: format, frameDuration: duration) { [weak self] pts in
            guard let self, !fired.withLock({ f in defer { f = true }; return f }) else { return }
            // Changes made between two frames reach the same frame: observers see the last one's values.
            if self.liveStreams.withLock({ $0.published }) == generation {
                self.observers.send(TimedControlValue(control: .activeFormat, value: .menu(Self.formatName(format)), presentationTime: pts))
                self.observers.send(TimedControlValue(control: .activeFrameDuration, value: .real(duration.seconds), presentationTime: pts))
            }
            if let completion { self.callbackQueue.async { completion(pts) } }
        }
        do {
            for handler in handlers { try handler(change) }
        } catch {
            state.withLock { s in
                s.activeFormatIndex = previous.activeFormatIndex
                s.activeVideoMinFrameDuration = previous.activeVideoMinFrameDuration
                s.activeVideoMaxFrameDuration = previous.activeVideoMaxFrameDuration
            }
            throw error
        }
    }

    // MARK: Stabilization

    /// Connections' preferred stabilization modes, by connection.
    private static let stabilizationRanks: [VideoStabilizationMode] = [.off, .standard, .auto, .cinematic, .cinematicExtended]

    /// A connection's preferred stabilization (`CaptureConnection.preferredVideoStabilizationMode`):
    /// the device's stream stabilizes with the strongest mode any connection asks for, resolved per
    /// frame against the active format (a mode the format lacks is off, `auto` is the best it has),
    /// where the driver can (`stabilization.mode`; the simulator). No configuration lock: this is
    /// the session's business, as in AVFoundation.
    public func requestStabilization(_ mode: VideoStabilizationMode, by connection: ObjectIdentifier) {
        func strongest(_ r: [ObjectIdentifier: VideoStabilizationMode]) -> VideoStabilizationMode {
            r.values.max { (Self.stabilizationRanks.firstIndex(of: $0) ?? 0) < (Self.stabilizationRanks.firstIndex(of: $1) ?? 0) } ?? .off
        }
        let (before, after) = stabilization.withLock { r -> (VideoStabilizationMode, VideoStabilizationMode) in
            let before = strongest(r)
            r[connection] = mode == .off ? nil : mode
            return (before, strongest(r))
        }
        // Nothing changed (e.g. a connection that never asked goes away): leave the driver alone.
        guard before != after || mode != .off else { return }
        guard controlDescription(.videoStabilizationMode) != nil, let driver = try? driverDevice() else { return }
        try? driver.setValue(.menu(after.rawValue), for: .videoStabilizationMode)
    }

    /// A format as `activeFormat` observations name it: `420v 1280x720`.
    public static func formatName(_ format: DeviceFormat) -> String {
        guard let pixelFormat = format.pixelFormat, let dimensions = format.dimensions else { return "\(format.formatDescription)" }
        return "\(pixelFormat) \(dimensions)"
    }

    static func fps(_ d: MediaTime) -> String { String(format: "%g", 1 / d.seconds) }

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
        try state.withLock { (s: inout State) throws(CaptureError) -> any DriverDevice in try openLocked(&s) }
    }

    private func openLocked(_ s: inout State) throws(CaptureError) -> any DriverDevice {
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

    // MARK: Controls as data

    /// Every control the driver lists (empty when the device cannot be opened).
    public var controls: [ControlDescription] { (try? driverDevice().controls) ?? [] }

    public func controlDescription(_ id: ControlID) -> ControlDescription? { controls.first { $0.id == id } }

    /// The control's current value (for self-changing controls: the value of the latest frame).
    public func value(of id: ControlID) throws(CaptureError) -> ControlValue {
        try driverDevice().value(of: id)
    }

    /// Sets any control the driver lists. Needs the configuration lock, except scene parameters
    /// of the simulator (`scene.*`), which describe the world rather than the device.
    public func setValue(_ value: ControlValue, for id: ControlID,
                         completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard let description = controlDescription(id) else {
            throw .controlNotSupported(device: uniqueID, control: id.description, detail: "the device has no such control")
        }
        guard !description.isReadOnly else {
            throw .controlNotSupported(device: uniqueID, control: id.description, detail: "it is read-only")
        }
        try Self.validate(value, against: description)
        try apply([(id, value)], operation: "set \(id)", needsLock: !id.isSceneParameter, completion: completion)
    }

    static func validate(_ value: ControlValue, against description: ControlDescription) throws(CaptureError) {
        let name = description.id.description
        switch description.kind {
        case .bool:
            guard value.boolValue != nil else { throw .valueOutOfRange(control: name, value: "\(value)", allowed: "true or false") }
        case .integer(let lo, let hi, _):
            guard let v = value.doubleValue, v >= Double(lo), v <= Double(hi) else {
                throw .valueOutOfRange(control: name, value: "\(value)", allowed: "\(lo)…\(hi)")
            }
        case .real(let lo, let hi):
            guard let v = value.doubleValue, v >= lo, v <= hi else {
                throw .valueOutOfRange(control: name, value: "\(value)", allowed: "\(Self.number(lo))…\(Self.number(hi))")
            }
        case .menu(let entries):
            guard let m = value.menuValue, entries.contains(m) else {
                throw .valueOutOfRange(control: name, value: "\(value)", allowed: entries.joined(separator: ", "))
            }
        case .text:
            guard case .text = value else { throw .valueOutOfRange(control: name, value: "\(value)", allowed: "text") }
        }
    }

    static func number(_ v: Double) -> String { String(format: "%g", v) }

    /// Applies values in one step under the facade's lock, so a completion is tied to exactly the
    /// revision that contains them.
    private func apply(_ values: [(ControlID, ControlValue)], operation: String, needsLock: Bool = true,
                       completion: (@Sendable (MediaTime) -> Void)?) throws(CaptureError) {
        let immediate = try state.withLock { (s: inout State) throws(CaptureError) -> Bool in
            if needsLock { try requireLock(s, operation) }
            let driver = try openLocked(&s)
            for (id, value) in values { try driver.setValue(value, for: id) }
            guard let completion else { return false }
            if let reporting = driver as? any ControlReportingDevice {
                s.pending.append((reporting.controlRevision, completion))
                return false
            }
            return true
        }
        if immediate, let completion { callbackQueue.async { completion(.invalid) } }
    }

    private func double(_ id: ControlID) -> Double? { try? value(of: id).doubleValue }
    private func bool(_ id: ControlID) -> Bool { (try? value(of: id).boolValue) == true }
    private func menu(_ id: ControlID) -> String? { try? value(of: id).menuValue }
    private func isWritable(_ id: ControlID) -> Bool { controlDescription(id).map { !$0.isReadOnly } ?? false }

    private func menuEntries(_ id: ControlID) -> [String] {
        if case .menu(let entries)? = controlDescription(id)?.kind { return entries }
        return []
    }

    private func unsupported(_ control: String, _ detail: String) -> CaptureError {
        .controlNotSupported(device: uniqueID, control: control, detail: detail)
    }

    // MARK: Per-frame reports, completions, observation

    private func handle(_ report: ControlReport) {
        let (ready, changed) = state.withLock { s -> ([@Sendable (MediaTime) -> Void], [TimedControlValue]) in
            var ready: [@Sendable (MediaTime) -> Void] = []
            while let first = s.pending.first, first.revision <= report.revision {
                ready.append(s.pending.removeFirst().handler)
            }
            var changed: [TimedControlValue] = []
            for (id, value) in report.values where s.lastReported[id] != value {
                s.lastReported[id] = value
                changed.append(TimedControlValue(control: id, value: value, presentationTime: report.presentationTime))
            }
            // Sort only what changed (usually nothing): the same order as before, without sorting
            // every control by name on every frame.
            if changed.count > 1 { changed.sort { $0.control.description < $1.control.description } }
            return (ready, changed)
        }
        let pts = report.presentationTime
        for handler in ready { callbackQueue.async { handler(pts) } }
        for change in changed { observers.send(change) }
        if report.subjectAreaChanged { subjectAreaEvents.send(pts) }
    }

    /// Every change of a control that changes on its own (adjusting flags, lens position, exposure
    /// duration, ISO, gains, torch level, zoom during a ramp…) as the PTS of the first frame that
    /// has it. Values arrive while the device streams; the sequence ends when the device disconnects.
    public func observe(_ control: ControlID) -> AsyncStream<TimedControlValue> {
        observers.subscribe(control)
    }

    /// Subject-area-change notifications (only while monitoring is enabled): the PTS of the frame
    /// where the change was seen.
    public func subjectAreaChanges() -> AsyncStream<MediaTime> { subjectAreaEvents.subscribe() }

    public var isSubjectAreaChangeMonitoringEnabled: Bool { bool(.subjectAreaChangeMonitoring) }

    public func setSubjectAreaChangeMonitoringEnabled(_ enabled: Bool) throws(CaptureError) {
        guard controlDescription(.subjectAreaChangeMonitoring) != nil else {
            throw unsupported("subject area change monitoring", "the device cannot detect subject area changes")
        }
        try apply([(.subjectAreaChangeMonitoring, .bool(enabled))], operation: "setSubjectAreaChangeMonitoringEnabled", completion: nil)
    }

    // MARK: Focus

    public var focusMode: FocusMode { menu(.focusMode).flatMap(FocusMode.init(rawValue:)) ?? .locked }

    /// A fixed-focus device supports only `.locked`.
    public func isFocusModeSupported(_ mode: FocusMode) -> Bool {
        let entries = menuEntries(.focusMode)
        return entries.isEmpty ? mode == .locked : entries.contains(mode.rawValue)
    }

    public func setFocusMode(_ mode: FocusMode) throws(CaptureError) {
        guard isFocusModeSupported(mode) else { throw unsupported("focus.mode", "mode \(mode.rawValue) (supported: \(supportedNames(FocusMode.allCases, isFocusModeSupported)))") }
        if controlDescription(.focusMode) == nil {
            try withLockCheck("setFocusMode")
            return
        }
        try apply([(.focusMode, .menu(mode.rawValue))], operation: "setFocusMode", completion: nil)
    }

    public var isFocusPointOfInterestSupported: Bool { isWritable(.focusPointOfInterestX) }

    public var focusPointOfInterest: CapturePoint {
        CapturePoint(x: double(.focusPointOfInterestX) ?? 0.5, y: double(.focusPointOfInterestY) ?? 0.5)
    }

    /// Sets where autofocus measures; it does not focus by itself: set an auto mode afterwards.
    public func setFocusPointOfInterest(_ point: CapturePoint) throws(CaptureError) {
        guard isFocusPointOfInterestSupported else { throw unsupported("focus.pointOfInterest", "no focus point of interest") }
        try Self.checkPoint(point, "focus.pointOfInterest")
        try apply([(.focusPointOfInterestX, .real(point.x)), (.focusPointOfInterestY, .real(point.y))],
                  operation: "setFocusPointOfInterest", completion: nil)
    }

    static func checkPoint(_ p: CapturePoint, _ name: String) throws(CaptureError) {
        guard (0...1).contains(p.x), (0...1).contains(p.y) else {
            throw .valueOutOfRange(control: name, value: "\(p)", allowed: "x and y in 0…1, (0, 0) top-left")
        }
    }

    /// 0 is the closest focus, 1 the farthest. Changes by itself while autofocus works.
    public var lensPosition: Double { double(.lensPosition) ?? 1 }

    public var isLockingFocusWithCustomLensPositionSupported: Bool { isWritable(.lensPosition) }

    public var isAdjustingFocus: Bool { bool(.isAdjustingFocus) }

    /// Locks focus at `lensPosition` (0…1, or `currentLensPosition` to keep the lens where it is);
    /// the completion gets the PTS of the first frame with the lens there.
    public func setFocusModeLocked(lensPosition: Double,
                                   completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isFocusModeSupported(.locked), controlDescription(.focusMode) != nil else {
            throw unsupported("focus.lensPosition", "the lens has fixed focus")
        }
        if lensPosition == Self.currentLensPosition {
            try apply([(.focusMode, .menu(FocusMode.locked.rawValue))], operation: "setFocusModeLocked", completion: completion)
            return
        }
        guard isLockingFocusWithCustomLensPositionSupported else {
            throw unsupported("focus.lensPosition", "locking focus at a custom lens position is not supported")
        }
        guard (0...1).contains(lensPosition) else {
            throw .valueOutOfRange(control: "focus.lensPosition", value: Self.number(lensPosition), allowed: "0…1")
        }
        try apply([(.focusMode, .menu(FocusMode.locked.rawValue)), (.lensPosition, .real(lensPosition))],
                  operation: "setFocusModeLocked", completion: completion)
    }

    public var isSmoothAutoFocusSupported: Bool { isWritable(.smoothAutoFocus) }
    public var isSmoothAutoFocusEnabled: Bool { bool(.smoothAutoFocus) }

    public func setSmoothAutoFocusEnabled(_ enabled: Bool) throws(CaptureError) {
        guard isSmoothAutoFocusSupported else { throw unsupported("focus.smooth", "smooth autofocus is not supported") }
        try apply([(.smoothAutoFocus, .bool(enabled))], operation: "setSmoothAutoFocusEnabled", completion: nil)
    }

    // MARK: Exposure

    public var exposureMode: ExposureMode { menu(.exposureMode).flatMap(ExposureMode.init(rawValue:)) ?? .locked }

    public func isExposureModeSupported(_ mode: ExposureMode) -> Bool { menuEntries(.exposureMode).contains(mode.rawValue) }

    public func setExposureMode(_ mode: ExposureMode) throws(CaptureError) {
        guard isExposureModeSupported(mode) else { throw unsupported("exposure.mode", "mode \(mode.rawValue) (supported: \(supportedNames(ExposureMode.allCases, isExposureModeSupported)))") }
        try apply([(.exposureMode, .menu(mode.rawValue))], operation: "setExposureMode", completion: nil)
    }

    public var isExposurePointOfInterestSupported: Bool { isWritable(.exposurePointOfInterestX) }

    public var exposurePointOfInterest: CapturePoint {
        CapturePoint(x: double(.exposurePointOfInterestX) ?? 0.5, y: double(.exposurePointOfInterestY) ?? 0.5)
    }

    public func setExposurePointOfInterest(_ point: CapturePoint) throws(CaptureError) {
        guard isExposurePointOfInterestSupported else { throw unsupported("exposure.pointOfInterest", "no exposure point of interest") }
        try Self.checkPoint(point, "exposure.pointOfInterest")
        try apply([(.exposurePointOfInterestX, .real(point.x)), (.exposurePointOfInterestY, .real(point.y))],
                  operation: "setExposurePointOfInterest", completion: nil)
    }

    /// The exposure time of the latest frame (changes by itself in auto modes).
    public var exposureDuration: MediaTime {
        MediaTime(seconds: double(.exposureDuration) ?? 0, preferredTimescale: 1_000_000_000)
    }

    public var iso: Double { double(.iso) ?? 0 }
    public var isAdjustingExposure: Bool { bool(.isAdjustingExposure) }
    /// How far (EV) the metered exposure is from the target.
    public var exposureTargetOffset: Double { double(.exposureTargetOffset) ?? 0 }

    /// Custom exposure: `duration` within the active format's min/max exposure duration (or
    /// `currentExposureDuration`), `iso` within its min/max ISO (or `currentISO`). A duration
    /// longer than the frame duration lengthens the frames, as sensors do.
    public func setExposureModeCustom(duration: MediaTime, iso: Double,
                                      completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isExposureModeSupported(.custom) else { throw unsupported("exposure.mode", "custom exposure is not supported") }
        let format = activeFormat
        var values: [(ControlID, ControlValue)] = [(.exposureMode, .menu(ExposureMode.custom.rawValue))]
        if duration.isValid {
            guard duration.isNumeric, duration >= format.minExposureDuration, duration <= format.maxExposureDuration else {
                throw .valueOutOfRange(control: "exposure.duration", value: "\(Self.number(duration.seconds)) s",
                                       allowed: "\(Self.number(format.minExposureDuration.seconds))…\(Self.number(format.maxExposureDuration.seconds)) s")
            }
            values.append((.exposureDuration, .real(duration.seconds)))
        }
        if iso != Self.currentISO {
            guard iso >= format.minISO, iso <= format.maxISO else {
                throw .valueOutOfRange(control: "exposure.iso", value: Self.number(iso),
                                       allowed: "\(Self.number(format.minISO))…\(Self.number(format.maxISO))")
            }
            values.append((.iso, .real(iso)))
        }
        try apply(values, operation: "setExposureModeCustom", completion: completion)
    }

    public var exposureTargetBias: Double { double(.exposureTargetBias) ?? 0 }

    public var minExposureTargetBias: Double {
        if case .real(let lo, _)? = controlDescription(.exposureTargetBias)?.kind { return lo }
        return 0
    }

    public var maxExposureTargetBias: Double {
        if case .real(_, let hi)? = controlDescription(.exposureTargetBias)?.kind { return hi }
        return 0
    }

    public func setExposureTargetBias(_ bias: Double, completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isWritable(.exposureTargetBias) else { throw unsupported("exposure.bias", "no exposure target bias") }
        guard bias >= minExposureTargetBias, bias <= maxExposureTargetBias else {
            throw .valueOutOfRange(control: "exposure.bias", value: Self.number(bias),
                                   allowed: "\(Self.number(minExposureTargetBias))…\(Self.number(maxExposureTargetBias)) EV")
        }
        try apply([(.exposureTargetBias, .real(bias))], operation: "setExposureTargetBias", completion: completion)
    }

    // MARK: White balance

    public var whiteBalanceMode: WhiteBalanceMode {
        menu(.whiteBalanceMode).flatMap(WhiteBalanceMode.init(rawValue:)) ?? .locked
    }

    public func isWhiteBalanceModeSupported(_ mode: WhiteBalanceMode) -> Bool {
        menuEntries(.whiteBalanceMode).contains(mode.rawValue)
    }

    public func setWhiteBalanceMode(_ mode: WhiteBalanceMode) throws(CaptureError) {
        guard isWhiteBalanceModeSupported(mode) else { throw unsupported("whiteBalance.mode", "mode \(mode.rawValue) (supported: \(supportedNames(WhiteBalanceMode.allCases, isWhiteBalanceModeSupported)))") }
        try apply([(.whiteBalanceMode, .menu(mode.rawValue))], operation: "setWhiteBalanceMode", completion: nil)
    }

    public var isLockingWhiteBalanceWithCustomDeviceGainsSupported: Bool { isWritable(.whiteBalanceRedGain) }

    public var maxWhiteBalanceGain: Double {
        if case .real(_, let hi)? = controlDescription(.whiteBalanceRedGain)?.kind { return hi }
        return 1
    }

    /// The gains of the latest frame (changes by itself in auto modes). Devices that only have a
    /// temperature control report the gains of that temperature.
    public var deviceWhiteBalanceGains: WhiteBalanceGains {
        if let r = double(.whiteBalanceRedGain), let g = double(.whiteBalanceGreenGain), let b = double(.whiteBalanceBlueGain) {
            return WhiteBalanceGains(red: r, green: g, blue: b)
        }
        if let t = double(.whiteBalanceTemperature) { return ColorScience.gains(for: TemperatureAndTint(temperature: t)) }
        return .unity
    }

    /// The gains that would make the latest frame average to grey.
    public var grayWorldDeviceWhiteBalanceGains: WhiteBalanceGains {
        guard let r = double(.grayWorldRedGain), let g = double(.grayWorldGreenGain), let b = double(.grayWorldBlueGain) else {
            return deviceWhiteBalanceGains
        }
        return WhiteBalanceGains(red: r, green: g, blue: b)
    }

    public var isAdjustingWhiteBalance: Bool { bool(.isAdjustingWhiteBalance) }

    public func temperatureAndTintValues(for gains: WhiteBalanceGains) -> TemperatureAndTint {
        ColorScience.temperatureAndTint(for: gains)
    }

    public func deviceWhiteBalanceGains(for values: TemperatureAndTint) -> WhiteBalanceGains {
        ColorScience.gains(for: values)
    }

    /// Locks white balance at `gains` (each 1…maxWhiteBalanceGain, or `.current`).
    public func setWhiteBalanceModeLocked(gains: WhiteBalanceGains,
                                          completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        guard isWhiteBalanceModeSupported(.locked) else { throw unsupported("whiteBalance.mode", "white balance cannot be locked") }
        if gains == .current {
            try apply([(.whiteBalanceMode, .menu(WhiteBalanceMode.locked.rawValue))], operation: "setWhiteBalanceModeLocked", completion: completion)
            return
        }
        guard isLockingWhiteBalanceWithCustomDeviceGainsSupported else {
            throw unsupported("whiteBalance.gains", "locking white balance with custom gains is not supported")
        }
        let maxGain = maxWhiteBalanceGain
        for (name, g) in [("red", gains.red), ("green", gains.green), ("blue", gains.blue)] where !(g >= 1 && g <= maxGain) {
            throw .valueOutOfRange(control: "whiteBalance.gains.\(name)", value: Self.number(g), allowed: "1…\(Self.number(maxGain))")
        }
        try apply([(.whiteBalanceMode, .menu(WhiteBalanceMode.locked.rawValue)), (.whiteBalanceRedGain, .real(gains.red)),
                   (.whiteBalanceGreenGain, .real(gains.green)), (.whiteBalanceBlueGain, .real(gains.blue))],
                  operation: "setWhiteBalanceModeLocked", completion: completion)
    }

    /// Locks white balance for light of this temperature: through gains where the device has them,
    /// otherwise through its temperature control (UVC webcams).
    public func setWhiteBalanceModeLocked(temperatureAndTint values: TemperatureAndTint,
                                          completion: (@Sendable (MediaTime) -> Void)? = nil) throws(CaptureError) {
        if isLockingWhiteBalanceWithCustomDeviceGainsSupported {
            let gains = ColorScience.gains(for: values)
            guard max(gains.red, gains.green, gains.blue) <= maxWhiteBalanceGain else {
                throw .valueOutOfRange(control: "whiteBalance.temperature", value: "\(values)",
                                       allowed: "temperatures whose gains stay within 1…\(Self.number(maxWhiteBalanceGain)) (gains would be \(gains))")
            }
            try setWhiteBalanceModeLocked(gains: gains, completion: completion)
            return
        }
        guard let description = controlDescription(.whiteBalanceTemperature), !description.isReadOnly else {
            throw unsupported("whiteBalance.temperature", "white balance cannot be set")
        }
        try Self.validate(.real(values.temperature), against: description)
        var list: [(ControlID, ControlValue)] = []
        if isWhiteBalanceModeSupported(.locked) { list.append((.whiteBalanceMode, .menu(WhiteBalanceMode.locked.rawValue))) }
        list.append((.whiteBalanceTemperature, .real(values.temperature)))
        try apply(list, operation: "setWhiteBalanceModeLocked", completion: completion)
    }

    // MARK: Torch

    public var hasTorch: Bool { controlDescription(.torchMode) != nil }
    public var isTorchAvailable: Bool { hasTorch && maxAvailableTorchLevel > 0 }
    public var torchMode: TorchMode { menu(.torchMode).flatMap(TorchMode.init(rawValue:)) ?? .off }
    /// The torch's current level, 0 when off.
    public var torchLevel: Double { double(.torchLevel) ?? 0 }
    public var isTorchActive: Bool { torchLevel > 0 }
    /// The highest level the torch can give now; below 1 when the device is hot.
    public var maxAvailableTorchLevel: Double { hasTorch ? (double(.maxAvailableTorchLevel) ?? 1) : 0 }

    public func isTorchModeSupported(_ mode: TorchMode) -> Bool {
        hasTorch ? menuEntries(.torchMode).contains(mode.rawValue) : mode == .off
    }

    public func setTorchMode(_ mode: TorchMode) throws(CaptureError) {
        guard hasTorch else { throw unsupported("torch.mode", "the device has no torch") }
        guard isTorchModeSupported(mode) else { throw unsupported("torch.mode", "mode \(mode.rawValue)") }
        try apply([(.torchMode, .menu(mode.rawValue))], operation: "setTorchMode", completion: nil)
    }

    /// Turns the torch on at `level` in (0, 1], or `torchLevelMaximumAvailable`. A level in range but
    /// above `maxAvailableTorchLevel` is a runtime error (`torchLevelUnavailable`).
    public func setTorchModeOn(level: Double) throws(CaptureError) {
        guard hasTorch else { throw unsupported("torch.level", "the device has no torch") }
        let available = maxAvailableTorchLevel
        let wanted = level == Self.torchLevelMaximumAvailable ? available : level
        guard level == Self.torchLevelMaximumAvailable || (level > 0 && level <= 1) else {
            throw .valueOutOfRange(control: "torch.level", value: Self.number(level), allowed: "greater than 0, at most 1")
        }
        guard wanted <= available, wanted > 0 else { throw .torchLevelUnavailable(requested: wanted, available: available) }
        try apply([(.torchMode, .menu(TorchMode.on.rawValue)), (.torchLevel, .real(wanted))], operation: "setTorchModeOn", completion: nil)
    }

    // MARK: Zoom

    public var videoZoomFactor: Double { double(.zoomFactor) ?? 1 }
    public var isRampingVideoZoom: Bool { bool(.isRampingZoom) }

    /// Jumps to `factor` in 1…activeFormat.videoMaxZoomFactor.
    public func setVideoZoomFactor(_ factor: Double) throws(CaptureError) {
        try checkZoom(factor)
        try apply([(.zoomFactor, .real(factor))], operation: "setVideoZoomFactor", completion: nil)
    }

    /// Moves smoothly to `factor` at `rate` powers of two per second.
    public func ramp(toVideoZoomFactor factor: Double, withRate rate: Double) throws(CaptureError) {
        try checkZoom(factor)
        guard rate > 0, rate.isFinite else {
            throw .valueOutOfRange(control: "zoom.rampRate", value: Self.number(rate), allowed: "a positive number of powers of two per second")
        }
        guard controlDescription(.zoomRampTarget) != nil else { throw unsupported("zoom.ramp", "zoom ramps are not supported") }
        try apply([(.zoomRampTarget, .real(factor)), (.zoomRampRate, .real(rate))], operation: "ramp(toVideoZoomFactor:)", completion: nil)
    }

    public func cancelVideoZoomRamp() throws(CaptureError) {
        guard controlDescription(.zoomRampRate) != nil else { throw unsupported("zoom.ramp", "zoom ramps are not supported") }
        try apply([(.zoomRampRate, .real(0))], operation: "cancelVideoZoomRamp", completion: nil)
    }

    private func checkZoom(_ factor: Double) throws(CaptureError) {
        guard controlDescription(.zoomFactor) != nil else { throw unsupported("zoom.factor", "the device cannot zoom") }
        let maxZoom = activeFormat.videoMaxZoomFactor
        guard factor >= 1, factor <= maxZoom else {
            throw .valueOutOfRange(control: "zoom.factor", value: Self.number(factor), allowed: "1…\(Self.number(maxZoom))")
        }
    }

    // MARK: Helpers

    private func withLockCheck(_ operation: String) throws(CaptureError) {
        try state.withLock { (s: inout State) throws(CaptureError) in try requireLock(s, operation) }
    }

    private func supportedNames<M: RawRepresentable>(_ all: [M], _ test: (M) -> Bool) -> String where M.RawValue == String {
        let names = all.filter(test).map(\.rawValue)
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}
