import Foundation

// MARK: - The session

/// The app's audio session (AVAudioSession) over one `DeviceRegistry`: category, activation,
/// inputs and data sources, gain, sample rate, the current route, route changes and interruptions.
///
/// `AudioSession.shared` (in CaptureKit) is the process-wide one over `CaptureKit.sharedRegistry`;
/// tests make their own with `AudioSession(registry:)`. A session governs the devices of its
/// registry: a `CaptureSession` with an audio input of that registry (and an `AudioRecorder`, which
/// runs one) refuses to start recording when the category does not allow it, and
/// `DeviceRegistry.defaultDevice(for: .audio)` answers the current route's input.
///
/// Interruptions are between sessions of this process: activating a category that does not mix
/// interrupts every other active session (`.began`); deactivating with `notifyOthers` ends them
/// (`.ended(shouldResume: true)`). Tests that run in parallel pass their own
/// `AudioInterruptionDomain()`, or one test's activation pauses another's recorder.
public final class AudioSession: Sendable {
    public let registry: DeviceRegistry
    /// The sessions that interrupt each other (default: the whole process).
    public let interruptionDomain: AudioInterruptionDomain

    struct State {
        var category = AudioSessionCategory.playAndRecord
        var active = false
        var preferredInput: String?
        var preferredDataSources: [String: AudioSessionDataSourceDescription] = [:]
        var preferredSampleRate: Double = 0
        var preferredIOBufferDuration: TimeInterval = 0
        var outputOverride = AudioSessionPortOverride.none
        var lastRoute: AudioSessionRouteDescription?
        var interruptedBy: ObjectIdentifier?
        var handlers: [Int: @Sendable (AudioSessionEvent) -> Void] = [:]
        var nextHandler = 0
        var observerToken: Int?
    }

    private let state = Locked(State())
    private let events = EventBroadcaster<AudioSessionEvent>()

    private struct WeakSession { weak var session: AudioSession? }
    private static let live = Locked<[WeakSession]>([])

    public init(registry: DeviceRegistry, interruptionDomain: AudioInterruptionDomain = .process) {
        self.registry = registry
        self.interruptionDomain = interruptionDomain
        let token = registry.addDeviceObserver { [weak self] event in self?.deviceChanged(event) }
        state.withLock { $0.observerToken = token }
        Self.live.withLock { list in
            list.removeAll { $0.session == nil }
            list.append(WeakSession(session: self))
        }
        registry.audioSessionLink.withLock { $0.session = self }
        // Materialize the audio devices so unplugs reach the registry's observers.
        _ = try? registry.devices(mediaType: .audio)
        let route = computeRoute()
        state.withLock { $0.lastRoute = route }
    }

    deinit {
        if let token = state.withLock({ $0.observerToken }) { registry.removeDeviceObserver(token) }
    }

    /// The session that governs `device` (one whose registry made it), if any.
    public static func governing(_ device: CaptureDevice) -> AudioSession? {
        live.withLock { $0.compactMap(\.session) }.first { $0.registry.holds(device) }
    }

    // MARK: Category and activation

    /// Default `.playAndRecord` (what AVCaptureSession configures an app's session to), so programs
    /// that never touch the audio session record and play as before.
    public var category: AudioSessionCategory { state.withLock { $0.category } }

    public func setCategory(_ category: AudioSessionCategory) throws(CaptureError) {
        let previous: AudioSessionRouteDescription? = state.withLock { s in
            guard s.category != category else { return nil }
            s.category = category
            return s.lastRoute
        }
        if let previous { post(.routeChange(reason: .categoryChange, previousRoute: previous)) }
    }

    public var isActive: Bool { state.withLock { $0.active } }

    /// Activates or deactivates the session. Activating a category that does not mix interrupts
    /// the other active sessions of the process; deactivating with `notifyOthers` lets them resume.
    public func setActive(_ active: Bool, notifyOthers: Bool = false) throws(CaptureError) {
        let category = state.withLock { s -> AudioSessionCategory in
            s.active = active
            if active { s.interruptedBy = nil }
            return s.category
        }
        let others = Self.live.withLock { $0.compactMap(\.session) }.filter { $0 !== self && $0.interruptionDomain === interruptionDomain }
        let me = ObjectIdentifier(self)
        if active, !category.mixesWithOthers {
            for other in others { other.interrupt(by: me) }
        } else if !active, notifyOthers {
            for other in others { other.endInterruption(by: me) }
        }
    }

    private func interrupt(by owner: ObjectIdentifier) {
        let began = state.withLock { s -> Bool in
            guard s.active else { return false }
            s.active = false
            s.interruptedBy = owner
            return true
        }
        if began { post(.interruption(.began)) }
    }

    private func endInterruption(by owner: ObjectIdentifier) {
        let ended = state.withLock { s -> Bool in
            guard s.interruptedBy == owner else { return false }
            s.interruptedBy = nil
            return true
        }
        if ended { post(.interruption(.ended(shouldResume: true))) }
    }

    /// Throws unless the category allows recording (a capture session with an audio input, an
    /// `AudioRecorder`).
    public func checkRecordingAllowed(_ operation: String = "recording") throws(CaptureError) {
        let category = self.category
        guard category.allowsRecording else {
            throw .audioCategoryRefuses(category: category.rawValue, operation: operation,
                                        allowedBy: AudioSessionCategory.names(\.allowsRecording))
        }
    }

    /// Throws unless the category allows playback (an `AudioPlayer`).
    public func checkPlaybackAllowed(_ operation: String = "playback") throws(CaptureError) {
        let category = self.category
        guard category.allowsPlayback else {
            throw .audioCategoryRefuses(category: category.rawValue, operation: operation,
                                        allowedBy: AudioSessionCategory.names(\.allowsPlayback))
        }
    }

    // MARK: Inputs

    private func routes() -> [String: (route: AudioInputRoute, driver: any AudioRoutingDriver)] {
        var result: [String: (AudioInputRoute, any AudioRoutingDriver)] = [:]
        for driver in registry.drivers {
            guard let routing = driver as? any AudioRoutingDriver else { continue }
            for route in routing.audioInputRoutes() where result[route.uniqueID] == nil { result[route.uniqueID] = (route, routing) }
        }
        return result
    }

    /// Every microphone of the registry as a port (AVAudioSession.availableInputs), in the
    /// registry's device order.
    public var availableInputs: [AudioSessionPortDescription] {
        let routes = self.routes()
        let devices = (try? registry.devices(mediaType: .audio)) ?? []
        return devices.map { device in
            if let (route, _) = routes[device.uniqueID] {
                let selected = route.dataSources.first { $0.dataSourceID == route.selectedDataSourceID }
                return AudioSessionPortDescription(portType: route.portType, portName: route.name, uid: route.uniqueID,
                                                   dataSources: route.dataSources.isEmpty ? nil : route.dataSources,
                                                   selectedDataSource: selected, session: self)
            }
            let type: AudioSessionPortType = device.uniqueID.hasPrefix("loop:") ? .loopback : .lineIn
            return AudioSessionPortDescription(portType: type, portName: device.localizedName, uid: device.uniqueID,
                                               dataSources: nil, selectedDataSource: nil, session: self)
        }
    }

    /// The input the app asked for (nil: the system's choice).
    public var preferredInput: AudioSessionPortDescription? {
        guard let uid = state.withLock({ $0.preferredInput }) else { return nil }
        return availableInputs.first { $0.uid == uid }
    }

    /// Routes input from `port` (nil: back to the default). Posts a route change (`.override`).
    public func setPreferredInput(_ port: AudioSessionPortDescription?) throws(CaptureError) {
        if let port, !availableInputs.contains(where: { $0.uid == port.uid }) {
            throw .audioRouteUnavailable("no input \(port.uid) (available: \(availableInputs.map(\.uid).joined(separator: ", ")))")
        }
        let previous = state.withLock { s -> AudioSessionRouteDescription? in
            s.preferredInput = port?.uid
            return s.lastRoute
        }
        if let uid = port?.uid, let source = state.withLock({ $0.preferredDataSources[uid] }) {
            try setPreferredDataSource(source, forPort: uid)
        }
        if let previous { post(.routeChange(reason: .override, previousRoute: previous)) }
    }

    func preferredDataSource(forPort uid: String) -> AudioSessionDataSourceDescription? {
        state.withLock { $0.preferredDataSources[uid] }
    }

    func setPreferredDataSource(_ source: AudioSessionDataSourceDescription?, forPort uid: String) throws(CaptureError) {
        guard let (route, driver) = routes()[uid] else { throw .audioRouteUnavailable("no input \(uid) with data sources") }
        guard let source else {
            state.withLock { $0.preferredDataSources[uid] = nil }
            return
        }
        guard route.dataSources.contains(where: { $0.dataSourceID == source.dataSourceID }) else {
            throw .audioRouteUnavailable("\(uid) has no data source \(source.dataSourceID) '\(source.dataSourceName)' (it has: \(route.dataSources.map { "\($0.dataSourceID) \($0.dataSourceName)" }.joined(separator: ", ")))")
        }
        try driver.selectDataSource(source.dataSourceID, forInput: uid)
        state.withLock { $0.preferredDataSources[uid] = source }
    }

    /// Selects a data source of the current input (AVAudioSession.setInputDataSource).
    public func setInputDataSource(_ source: AudioSessionDataSourceDescription?) throws(CaptureError) {
        guard let input = currentRoute.inputs.first else { throw .audioRouteUnavailable("there is no input") }
        try setPreferredDataSource(source, forPort: input.uid)
    }

    /// The data sources of the current input (nil when it has one microphone).
    public var inputDataSources: [AudioSessionDataSourceDescription]? { currentRoute.inputs.first?.dataSources }
    public var inputDataSource: AudioSessionDataSourceDescription? { currentRoute.inputs.first?.selectedDataSource }

    // MARK: Route

    private func computeRoute() -> AudioSessionRouteDescription {
        let inputs = availableInputs
        let preferred = state.withLock { $0.preferredInput }
        let input = inputs.first { $0.uid == preferred } ?? inputs.first { $0.portType == .builtInMic } ?? inputs.first
        let output = AudioSessionPortDescription(portType: .builtInSpeaker, portName: "Simulated Speaker", uid: "sim:speaker",
                                                 dataSources: nil, selectedDataSource: nil, session: nil)
        return AudioSessionRouteDescription(inputs: input.map { [$0] } ?? [], outputs: [output])
    }

    /// Where audio goes now: the preferred input if connected, else the built-in microphone, else
    /// the first microphone; the speaker.
    public var currentRoute: AudioSessionRouteDescription { computeRoute() }

    /// The output the app forces (AVAudioSession.overrideOutputAudioPort); posts `.override`.
    public func overrideOutputAudioPort(_ port: AudioSessionPortOverride) throws(CaptureError) {
        let previous = state.withLock { s -> AudioSessionRouteDescription? in
            guard s.outputOverride != port else { return nil }
            s.outputOverride = port
            return s.lastRoute
        }
        if let previous { post(.routeChange(reason: .override, previousRoute: previous)) }
    }

    /// The device of the current input (nil: no microphone).
    public func currentInputDevice() -> CaptureDevice? {
        guard let uid = currentRoute.inputs.first?.uid else { return nil }
        return try? registry.device(uniqueID: uid)
    }

    // MARK: Gain and rate

    /// The current input's gain 0…1 (1 when it cannot be set).
    public var inputGain: Float {
        guard let uid = currentRoute.inputs.first?.uid, let gain = routes()[uid]?.route.gain else { return 1 }
        return gain
    }

    public var isInputGainSettable: Bool {
        guard let uid = currentRoute.inputs.first?.uid else { return false }
        return routes()[uid]?.route.gain != nil
    }

    /// Sets the current input's gain: the simulator scales the samples by it, an ALSA card sets its
    /// mixer capture volume.
    public func setInputGain(_ gain: Float) throws(CaptureError) {
        guard gain.isFinite, (0...1).contains(gain) else { throw .valueOutOfRange(control: "inputGain", value: "\(gain)", allowed: "0…1") }
        guard let uid = currentRoute.inputs.first?.uid, let (route, driver) = routes()[uid], route.gain != nil else {
            throw .audioRouteUnavailable("the current input's gain cannot be set (isInputGainSettable is false)")
        }
        try driver.setInputGain(gain, forInput: uid)
    }

    public var preferredSampleRate: Double { state.withLock { $0.preferredSampleRate } }

    /// A hint: the input runs at it if its device has a format at that rate (see `sampleRate`).
    public func setPreferredSampleRate(_ rate: Double) throws(CaptureError) {
        guard rate.isFinite, rate == 0 || (8000...192_000).contains(rate) else {
            throw .valueOutOfRange(control: "preferredSampleRate", value: "\(rate)", allowed: "0 (none) or 8000…192000 Hz")
        }
        state.withLock { $0.preferredSampleRate = rate }
        guard rate > 0, let device = currentInputDevice(),
              let format = device.formats.first(where: { $0.audioFormat?.sampleRate == Int(rate) }),
              format != device.activeFormat else { return }
        try? device.lockForConfiguration()
        defer { device.unlockForConfiguration() }
        try? device.setActiveFormat(format)
    }

    /// The rate the current input actually runs at (its active format's).
    public var sampleRate: Double {
        guard let format = currentInputDevice()?.activeFormat.audioFormat else { return 0 }
        return Double(format.sampleRate)
    }

    public var preferredIOBufferDuration: TimeInterval { state.withLock { $0.preferredIOBufferDuration } }

    public func setPreferredIOBufferDuration(_ duration: TimeInterval) throws(CaptureError) {
        guard duration.isFinite, duration >= 0, duration <= 1 else {
            throw .valueOutOfRange(control: "preferredIOBufferDuration", value: "\(duration)", allowed: "0…1 s")
        }
        state.withLock { $0.preferredIOBufferDuration = duration }
    }

    /// The frames per buffer a capture session asks a microphone running at `sampleRate` for: the
    /// preferred IO buffer duration (16 frames at least), or nil without a preference (1024 frames).
    public func framesPerBuffer(sampleRate: Int) -> Int? {
        let duration = preferredIOBufferDuration
        guard duration > 0, sampleRate > 0 else { return nil }
        return max(16, Int((duration * Double(sampleRate)).rounded()))
    }

    /// The IO buffer duration capture streams of the current input run with: the preferred one
    /// rounded to whole frames, else 1024 frames (the simulator and `loop:mic` honour it; ALSA
    /// streams read their 10 ms periods).
    public var ioBufferDuration: TimeInterval {
        let rate = Int(sampleRate)
        guard rate > 0 else { return 0 }
        return Double(framesPerBuffer(sampleRate: rate) ?? 1024) / Double(rate)
    }

    // MARK: Notifications

    /// Route changes and interruptions as an AsyncSequence.
    public func notifications() -> AsyncStream<AudioSessionEvent> { events.subscribe() }

    /// Calls `handler` synchronously on the thread that causes each event; returns a token.
    @discardableResult
    public func addObserver(_ handler: @escaping @Sendable (AudioSessionEvent) -> Void) -> Int {
        state.withLock { s in
            defer { s.nextHandler += 1 }
            s.handlers[s.nextHandler] = handler
            return s.nextHandler
        }
    }

    public func removeObserver(_ token: Int) { _ = state.withLock { $0.handlers.removeValue(forKey: token) } }

    private func post(_ event: AudioSessionEvent) {
        let route = computeRoute()
        let handlers = state.withLock { s -> [@Sendable (AudioSessionEvent) -> Void] in
            s.lastRoute = route
            return s.handlers.sorted { $0.key < $1.key }.map(\.value)
        }
        for handler in handlers { handler(event) }
        events.send(event)
    }

    /// An ALSA playback device this process played to went away: a route change for its output.
    public func playbackDeviceUnavailable(_ uid: String) {
        let previous = state.withLock { $0.lastRoute } ?? computeRoute()
        var withOutput = previous
        withOutput.outputs = [AudioSessionPortDescription(portType: .lineOut, portName: uid, uid: uid, dataSources: nil,
                                                          selectedDataSource: nil, session: nil)]
        post(.routeChange(reason: .oldDeviceUnavailable, previousRoute: withOutput))
    }

    private func deviceChanged(_ event: DeviceEvent) {
        let previous = state.withLock { $0.lastRoute } ?? AudioSessionRouteDescription(inputs: [], outputs: [])
        switch event {
        case .connected(let device) where device.mediaType == .audio:
            post(.routeChange(reason: .newDeviceAvailable, previousRoute: previous))
        case .disconnected(let device) where device.mediaType == .audio:
            post(.routeChange(reason: .oldDeviceUnavailable, previousRoute: previous))
        default:
            break
        }
    }
}

/// Sessions that compete for the audio: activating one that does not mix interrupts the others
/// of its domain. `.process` is every session of the process (as on a phone, where it is the system).
public final class AudioInterruptionDomain: Sendable {
    public static let process = AudioInterruptionDomain()
    public init() {}
}

/// The registry's link to the audio session that governs it (weak: the session holds the registry).
struct AudioSessionLink {
    weak var session: AudioSession?
}
