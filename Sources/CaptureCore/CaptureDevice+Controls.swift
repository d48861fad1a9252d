import Foundation

extension CaptureDevice {
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
    func apply(_ values: [(ControlID, ControlValue)], operation: String, needsLock: Bool = true,
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

    func double(_ id: ControlID) -> Double? { try? value(of: id).doubleValue }
    func bool(_ id: ControlID) -> Bool { (try? value(of: id).boolValue) == true }
    func menu(_ id: ControlID) -> String? { try? value(of: id).menuValue }
    func isWritable(_ id: ControlID) -> Bool { controlDescription(id).map { !$0.isReadOnly } ?? false }

    func menuEntries(_ id: ControlID) -> [String] {
        if case .menu(let entries)? = controlDescription(id)?.kind { return entries }
        return []
    }

    func unsupported(_ control: String, _ detail: String) -> CaptureError {
        .controlNotSupported(device: uniqueID, control: control, detail: detail)
    }

    // MARK: Per-frame reports, completions, observation

    func handle(_ report: ControlReport) {
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

    // MARK: Helpers

    func withLockCheck(_ operation: String) throws(CaptureError) {
        try state.withLock { (s: inout State) throws(CaptureError) in try requireLock(s, operation) }
    }

    func supportedNames<M: RawRepresentable>(_ all: [M], _ test: (M) -> Bool) -> String where M.RawValue == String {
        let names = all.filter(test).map(\.rawValue)
        return names.isEmpty ? "none" : names.joined(separator: ", ")
    }
}
