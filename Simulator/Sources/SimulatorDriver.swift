import CaptureCore
import Foundation

/// The simulator backend: synthetic cameras and microphones described by profiles, on a
/// virtual or real-time clock. Everything they produce is a function of (profile, seed, index,
/// control state in effect at that frame).
///
/// `SimulatorDriver(seed:)` loads the built-in profiles plus those named by `CAPTUREKIT_PROFILES`
/// when its devices are first asked for (a process that only records from a real camera never
/// parses them); if one of those is malformed, `discoverDevices()` throws the error naming file,
/// field and problem.
public struct SimulatorDriver: CaptureDriver, AuthorizingDriver, HotPlugDriver, AudioRoutingDriver, AvailabilityReportingDriver,
                               EventReportingDriver {
    public let scheme = "sim"
    public let seed: UInt64
    /// The devices' profiles (empty if loading them failed: `discoverDevices()` throws why).
    public var profiles: [SimulatedDeviceProfile] { (try? catalog.loaded.get()) ?? [] }
    /// Scripted permission answers, hot-plug and other processes' locks.
    public let scenario: SimulatorScenario
    /// Compresses rendered frames for the MJPEG formats (nil: MJPEG streams are refused).
    public let compressor: (any FrameCompressor)?
    private let catalog: ProfileCatalog
    /// Whether the profiles have been loaded yet (they load when a device is first asked for).
    package var hasLoadedProfiles: Bool { catalog.isLoaded }
    /// The scenario's `deviceEvents`: drops the script causes, as a real backend reports them.
    public var events: DeviceEventCenter { scenario.deviceEvents }

    public init(seed: UInt64 = 0, scenario: SimulatorScenario = SimulatorScenario(), compressor: (any FrameCompressor)? = nil) {
        self.seed = seed
        self.scenario = scenario
        self.compressor = compressor
        catalog = ProfileCatalog(scenario: scenario, environment: ProcessInfo.processInfo.environment)
    }

    public init(seed: UInt64 = 0, profiles: [SimulatedDeviceProfile], scenario: SimulatorScenario = SimulatorScenario(),
                compressor: (any FrameCompressor)? = nil) {
        self.seed = seed
        self.scenario = scenario
        self.compressor = compressor
        catalog = ProfileCatalog(scenario: scenario, profiles: profiles)
    }

    public func discoverDevices() throws(CaptureError) -> [DeviceDescription] {
        try catalog.loaded.get().filter { scenario.isPluggedIn($0.uniqueID) }.map(\.deviceDescription)
    }

    public func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        guard let profile = try catalog.loaded.get().first(where: { $0.uniqueID == uniqueID }) else { throw .deviceNotFound(uniqueID) }
        guard scenario.isPluggedIn(uniqueID) else { throw .deviceDisconnected(uniqueID) }
        switch profile.kind {
        case .camera(let capabilities):
            return SimulatedCamera(profile: profile, capabilities: capabilities, seed: seed, scenario: scenario, compressor: compressor)
        case .microphone(let format, let tone):
            return SimulatedMicrophone(profile: profile, format: format, tone: tone, scenario: scenario)
        }
    }

    public func authorizationStatus(for mediaType: MediaType) -> AuthorizationStatus {
        scenario.authorizationStatus(for: mediaType)
    }

    public func requestAccess(for mediaType: MediaType) async -> Bool {
        await scenario.requestAccess(for: mediaType)
    }

    public func addHotPlugHandler(_ handler: @escaping @Sendable (HotPlugEvent) -> Void) {
        let catalog = self.catalog
        scenario.addHotPlugHandler { uniqueID, connected in
            if connected {
                if let profile = (try? catalog.loaded.get())?.first(where: { $0.uniqueID == uniqueID }) { handler(.added(profile.deviceDescription)) }
            } else {
                handler(.removed(uniqueID: uniqueID))
            }
        }
    }

    /// Interruptions of the scenario's fault timeline: a named device (or every device) is in use
    /// by another client, then given back.
    public func addAvailabilityHandler(_ handler: @escaping @Sendable (String, InterruptionReason?) -> Void) {
        let catalog = self.catalog
        scenario.addAvailabilityHandler { uniqueID, available in
            for profile in (try? catalog.loaded.get()) ?? [] where uniqueID == nil || profile.uniqueID == uniqueID {
                let reason: InterruptionReason = profile.mediaType == .audio ? .audioDeviceInUseByAnotherClient : .videoDeviceInUseByAnotherClient
                handler(profile.uniqueID, available ? nil : reason)
            }
        }
    }

    // MARK: Audio routing (the audio session's ports)

    public func audioInputRoutes() -> [AudioInputRoute] {
        profiles.filter { $0.mediaType == .audio && scenario.isPluggedIn($0.uniqueID) }.map { p in
            let settings = scenario.microphoneSettings(p.uniqueID)
            return AudioInputRoute(uniqueID: p.uniqueID, name: p.name, portType: p.port.portType,
                                   dataSources: p.port.dataSources.map(\.description),
                                   selectedDataSourceID: settings.dataSourceID ?? p.port.defaultDataSourceID, gain: settings.gain)
        }
    }

    public func selectDataSource(_ dataSourceID: Int, forInput uniqueID: String) throws(CaptureError) {
        guard let p = profiles.first(where: { $0.uniqueID == uniqueID && $0.mediaType == .audio }) else { throw .deviceNotFound(uniqueID) }
        guard p.port.dataSources.contains(where: { $0.description.dataSourceID == dataSourceID }) else {
            throw .audioRouteUnavailable("\(uniqueID) has no data source \(dataSourceID)")
        }
        scenario.setMicrophoneDataSource(dataSourceID, for: uniqueID)
    }

    public func setInputGain(_ gain: Float, forInput uniqueID: String) throws(CaptureError) {
        guard profiles.contains(where: { $0.uniqueID == uniqueID && $0.mediaType == .audio }) else { throw .deviceNotFound(uniqueID) }
        guard gain.isFinite, (0...1).contains(gain) else { throw .valueOutOfRange(control: "inputGain", value: "\(gain)", allowed: "0…1") }
        scenario.setMicrophoneGain(gain, for: uniqueID)
    }

    /// FNV-1a: a stable hash (Swift's Hasher is seeded per process).
    static func hash(_ text: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return h
    }
}

/// A simulator driver's profiles, loaded once, when first needed, each profile's initial plug state
/// given to the scenario as they load. Parsing the built-in JSON costs ≈ 25 M instructions (about
/// 8 ms, a tenth of a second under emulation), which a process recording from a V4L2 camera with
/// the default registry need not pay.
private final class ProfileCatalog: Sendable {
    private let state: Locked<Result<[SimulatedDeviceProfile], CaptureError>?>
    private let environment: [String: String]
    private let scenario: SimulatorScenario

    /// Profiles loaded on first use from the built-in ones and `environment`'s `CAPTUREKIT_PROFILES`.
    init(scenario: SimulatorScenario, environment: [String: String]) {
        self.scenario = scenario
        self.environment = environment
        state = Locked(nil)
        // Weak: the catalog holds the scenario, which must not hold it back.
        scenario.addProfileLoader { [weak self] in _ = self?.loaded }
    }

    /// Profiles given by the caller, in effect at once.
    init(scenario: SimulatorScenario, profiles: [SimulatedDeviceProfile]) {
        self.scenario = scenario
        environment = [:]
        for profile in profiles { scenario.applyInitialPlug(profile.uniqueID, pluggedIn: profile.pluggedIn) }
        state = Locked(.success(profiles))
    }

    var isLoaded: Bool { state.withLock { $0 != nil } }

    /// The profiles, or why they could not be loaded. The scenario's lock is taken inside this
    /// one (the scenario never calls out while holding its own, and calls this loader before
    /// taking it), so no one sees the profiles before their initial plug states are in place.
    var loaded: Result<[SimulatedDeviceProfile], CaptureError> {
        state.withLock { cached in
            if let cached { return cached }
            let result: Result<[SimulatedDeviceProfile], CaptureError>
            do throws(CaptureError) {
                result = .success(try SimulatedDeviceProfile.builtInAndEnvironment(environment))
            } catch {
                result = .failure(error)
            }
            if case .success(let profiles) = result {
                for profile in profiles { scenario.applyInitialPlug(profile.uniqueID, pluggedIn: profile.pluggedIn) }
            }
            cached = result
            return result
        }
    }
}

/// The simulator's script for everything outside the devices: what the user answers when asked
/// for camera/microphone access (grant, deny, restricted, after a delay), devices being unplugged
/// and plugged back, and other processes holding a device's configuration priority.
public final class SimulatorScenario: Sendable {
    /// Where the scenario's devices report drops the way real backends do (a `bufferError` is a
    /// `corruptData` drop); the drivers sharing this scenario report through it.
    public let deviceEvents = DeviceEventCenter()

    /// What `requestAccess` answers for a media type whose status is not determined yet.
    public enum AccessAnswer: Sendable, Hashable { case grant, deny, restricted }

    private struct State {
        var status: [MediaType: AuthorizationStatus]
        var answers: [MediaType: AccessAnswer] = [:]
        var delay: Duration = .zero
        var disconnected: Set<String> = []
        var externalLocks: [String: String] = [:]
        var videoFaults: [String: VideoFaults] = [:]
        var bufferStarvationTimeout: Duration = .seconds(10)
        var rendersAhead = true
        var leavesRenderAheadToDeliverer = false
        var renderAheadByDeliverer = 0
        var renderAheadCounts = (used: 0, discarded: 0)
        var handlers: [@Sendable (String, Bool) -> Void] = []
        /// Devices whose plugged-in state was set (by a profile's `pluggedIn` or connect/disconnect).
        var plugDecided: Set<String> = []
        /// Drivers whose profiles load on first use: run before a plug state is read or changed.
        var profileLoaders: [@Sendable () -> Void] = []
        var microphones: [String: MicrophoneSettings] = [:]
        var sceneTruth: [String: [SceneTruthFrame]] = [:]
        var faults = FaultTimeline()
        /// The fault clock's zero (the first stream's start since `faults` was set) and the events
        /// that have fired (each fires once).
        var faultOrigin: MediaTime?
        var firedFaults: Set<Int> = []
        /// Streams running per device (device actions fire from the device's own stream while it has one).
        var streaming: [String: Int] = [:]
        var availabilityHandlers: [@Sendable (String?, Bool) -> Void] = []
        /// Interruptions begun whose scripted end has not been delivered yet (virtual pace: it
        /// follows at once, off the stream's thread).
        var pendingResumes = 0
    }

    /// A simulated microphone's data source (nil: the port's default) and gain stage (0…1).
    public struct MicrophoneSettings: Sendable, Hashable {
        public var dataSourceID: Int?
        public var gain: Float = 1
    }

    public func microphoneSettings(_ uniqueID: String) -> MicrophoneSettings {
        state.withLock { $0.microphones[uniqueID] ?? MicrophoneSettings() }
    }

    /// Selects a microphone's data source; running streams switch at their next buffer.
    public func setMicrophoneDataSource(_ id: Int?, for uniqueID: String) {
        state.withLock { $0.microphones[uniqueID, default: MicrophoneSettings()].dataSourceID = id }
    }

    /// The gain stage every sample of the microphone goes through (running streams: next buffer).
    public func setMicrophoneGain(_ gain: Float, for uniqueID: String) {
        state.withLock { $0.microphones[uniqueID, default: MicrophoneSettings()].gain = max(0, min(1, gain)) }
    }

    /// A profile's initial state: an unplugged device starts disconnected unless it was plugged in
    /// (or unplugged) explicitly before.
    func applyInitialPlug(_ uniqueID: String, pluggedIn: Bool) {
        state.withLock { s in
            guard s.plugDecided.insert(uniqueID).inserted else { return }
            if !pluggedIn { s.disconnected.insert(uniqueID) }
        }
    }

    private let state: Locked<State>

    /// Starts authorized for video and audio (as a machine where the user already said yes).
    public init(authorization: AuthorizationStatus = .authorized) {
        state = Locked(State(status: [.video: authorization, .audio: authorization]))
    }

    public func authorizationStatus(for mediaType: MediaType) -> AuthorizationStatus {
        state.withLock { $0.status[mediaType] ?? .notDetermined }
    }

    /// The ground truth of a simulated camera's scene items: for each frame drawn with a QR code
    /// or a face (oldest first, the last `sceneTruthLimit` frames), what was drawn and where.
    public func sceneTruth(for uniqueID: String) -> [SceneTruthFrame] {
        state.withLock { $0.sceneTruth[uniqueID] ?? [] }
    }

    /// Frames of truth kept per camera.
    public static let sceneTruthLimit = 100_000

    public func clearSceneTruth() { state.withLock { $0.sceneTruth = [:] } }

    func recordSceneTruth(_ uniqueID: String, _ frame: SceneTruthFrame) {
        state.withLock { s in
            s.sceneTruth[uniqueID, default: []].append(frame)
            if s.sceneTruth[uniqueID]!.count > Self.sceneTruthLimit { s.sceneTruth[uniqueID]!.removeFirst(Self.sceneTruthLimit / 10) }
        }
    }

    public func setAuthorizationStatus(_ status: AuthorizationStatus, for mediaType: MediaType) {
        state.withLock { $0.status[mediaType] = status }
    }

    /// Scripts the user's answer to the next `requestAccess` while the status is `notDetermined`,
    /// given after `delay` (a real wait: the dialog is not part of virtual time).
    public func setAccessAnswer(_ answer: AccessAnswer, for mediaType: MediaType, after delay: Duration = .zero) {
        state.withLock {
            $0.answers[mediaType] = answer
            $0.delay = delay
        }
    }

    /// Asks once: a determined status is returned as is; otherwise the scripted answer (default:
    /// grant) becomes the status.
    public func requestAccess(for mediaType: MediaType) async -> Bool {
        let (status, delay) = state.withLock { ($0.status[mediaType] ?? .notDetermined, $0.delay) }
        if status != .notDetermined { return status == .authorized }
        if delay > .zero { try? await Task.sleep(for: delay) }
        return state.withLock { s in
            if let current = s.status[mediaType], current != .notDetermined { return current == .authorized }
            let answer = s.answers[mediaType] ?? .grant
            let newStatus: AuthorizationStatus = answer == .grant ? .authorized : answer == .deny ? .denied : .restricted
            s.status[mediaType] = newStatus
            return newStatus == .authorized
        }
    }

    public func isConnected(_ uniqueID: String) -> Bool {
        loadProfiles()
        return isPluggedIn(uniqueID)
    }

    /// `isConnected` for the simulator's own checks, made once its profiles are loaded (a device
    /// was discovered or opened): no loader runs, so a stream's per-frame check costs one lock.
    func isPluggedIn(_ uniqueID: String) -> Bool { state.withLock { !$0.disconnected.contains(uniqueID) } }

    /// A driver sharing this scenario whose profiles load on first use registers `load` here. It
    /// runs (outside this scenario's lock) before a device's plug state is read or changed, so a
    /// profile's initial state is in place first: a device that starts unplugged reads as
    /// unplugged, and connecting it is an `added` event, however early that happens.
    func addProfileLoader(_ load: @escaping @Sendable () -> Void) {
        state.withLock { $0.profileLoaders.append(load) }
    }

    private func loadProfiles() {
        for load in state.withLock({ $0.profileLoaders }) { load() }
    }

    /// Unplugs a device: its streams fail with `deviceDisconnected` and its device object is dead for good.
    public func disconnect(_ uniqueID: String) { setConnected(uniqueID, false) }

    /// Plugs a device back in: it appears as a new device object.
    public func connect(_ uniqueID: String) { setConnected(uniqueID, true) }

    private func setConnected(_ uniqueID: String, _ connected: Bool) {
        loadProfiles()
        let (changed, handlers) = state.withLock { s -> (Bool, [@Sendable (String, Bool) -> Void]) in
            s.plugDecided.insert(uniqueID)
            let changed = connected ? s.disconnected.remove(uniqueID) != nil : s.disconnected.insert(uniqueID).inserted
            return (changed, changed ? s.handlers : [])
        }
        for handler in handlers { handler(uniqueID, connected) }
        // As a real backend reports an unplug (V4L2's ENODEV) to its driver's events; after the
        // hot-plug handlers, so the registry sees the removal first, as before these events
        // existed (posting in between widened the window in which a stream marks its device
        // disconnected first, and the audio session missed its route change under TSan).
        if changed && !connected { deviceEvents.post(.disconnected(deviceID: uniqueID)) }
    }

    func addHotPlugHandler(_ handler: @escaping @Sendable (String, Bool) -> Void) {
        state.withLock { $0.handlers.append(handler) }
    }

    /// Pretends another process holds the device's configuration priority (nil releases it).
    public func setExternalConfigurationLock(_ uniqueID: String, holder: String?) {
        state.withLock { $0.externalLocks[uniqueID] = holder }
    }

    func externalLockHolder(_ uniqueID: String) -> String? { state.withLock { $0.externalLocks[uniqueID] } }

    /// Faults a camera's streams have from their next start: frames it loses and timestamp jitter.
    public struct VideoFaults: Sendable, Hashable {
        /// Frame indices the camera loses (delivered as a gap with a `.discontinuity` drop).
        public var droppedFrames: Set<Int64>
        /// Each frame's PTS moves by up to ± this many microseconds, a deterministic function of
        /// (seed, device, frame index).
        public var jitterMicroseconds: Int64

        public init(droppedFrames: Set<Int64> = [], jitterMicroseconds: Int64 = 0) {
            self.droppedFrames = droppedFrames
            self.jitterMicroseconds = jitterMicroseconds
        }
    }

    /// Scripts faults for a camera (nil removes them).
    public func setVideoFaults(_ faults: VideoFaults?, for uniqueID: String) {
        state.withLock { $0.videoFaults[uniqueID] = faults }
    }

    func videoFaults(_ uniqueID: String) -> VideoFaults? { state.withLock { $0.videoFaults[uniqueID] } }

    /// The scripted faults of this run (see `FaultTimeline`). Setting it rewinds the fault clock:
    /// its zero is the start of the next stream (a session's virtual start), and each event fires once.
    ///
    /// How events fire: stream faults (video, audio) are applied by the named device's stream to
    /// the first frame (buffer) whose start lies at or past the event's time (frame index); device
    /// actions (unplug, replug, priority) fire in the device's own stream while it streams, else in
    /// any stream of this scenario reaching the time (or `advanceFaultClock(to:)`); session faults
    /// in any stream. Output faults are not fired here: a file output reads them (`outputFaults`).
    /// Interruptions: in virtual pace an interruption takes no virtual time (nothing streams during
    /// it): the session is interrupted before the frame at the begin time, then resumes at once if
    /// an `interruptionEnded` follows; in real time it resumes after the scripted span of wall time.
    public var faults: FaultTimeline {
        get { state.withLock { $0.faults } }
        set {
            state.withLock {
                $0.faults = newValue
                $0.faultOrigin = nil
                $0.firedFaults = []
            }
        }
    }

    /// Adds an event to the running timeline without rewinding it (setting `faults` starts the
    /// fault clock and the fired set afresh): what has fired stays fired.
    public func addFault(_ event: FaultEvent) {
        state.withLock { $0.faults.events.append(event) }
    }

    /// Whether an interruption has begun whose scripted end is still on its way: in virtual pace
    /// the session resumes an instant later, on another thread; a stepping caller waits for it.
    public var isInterruptionResumePending: Bool { state.withLock { $0.pendingResumes > 0 } }

    /// The events that have fired so far, as indices into `faults.events`.
    public var firedFaultEvents: Set<Int> { state.withLock { $0.firedFaults } }

    /// The fault clock's zero: the anchor of the first stream started since `faults` was set.
    func faultClock(startingAt anchor: MediaTime, device: String) -> MediaTime {
        state.withLock { s in
            if s.faultOrigin == nil { s.faultOrigin = anchor }
            s.streaming[device, default: 0] += 1
            return s.faultOrigin!
        }
    }

    func streamStopped(device: String) {
        state.withLock { s in s.streaming[device] = max(0, (s.streaming[device] ?? 0) - 1) }
    }

    /// Marks fired and returns, in timeline order, the events due in a stream of `device` at
    /// `elapsed` on the fault clock (and frame `frame`, cameras) — nil device: no stream (an
    /// explicit advance), which takes time-based device and session actions only.
    func takeDueFaults(device: String?, elapsed: MediaTime, frame: Int64?) -> [(index: Int, event: FaultEvent)] {
        state.withLock { s in
            var due: [(Int, FaultEvent)] = []
            for (index, event) in s.faults.events.enumerated() where !s.firedFaults.contains(index) {
                let mine = device != nil && event.device == device
                switch event.fault.scope {
                case .output: continue
                case .video, .audio: guard mine else { continue }
                case .device:
                    // The device's own stream, when it has one, decides the exact frame.
                    if !mine, let target = event.device, (s.streaming[target] ?? 0) > 0 { continue }
                case .session: break
                }
                let isDue: Bool
                switch event.at {
                case .time(let t): isDue = t <= elapsed
                case .frame(let n): isDue = mine && frame.map { n <= $0 } == true
                }
                if isDue {
                    s.firedFaults.insert(index)
                    due.append((index, event))
                }
            }
            return due
        }
    }

    /// Fires the device and session actions due at `elapsed` on the fault clock when no stream
    /// runs to fire them (after an unplug stopped the session, say, a replug at a later time).
    /// Returns how many fired.
    @discardableResult
    public func advanceFaultClock(to elapsed: MediaTime) -> Int {
        let due = takeDueFaults(device: nil, elapsed: elapsed, frame: nil)
        for (index, event) in due {
            if let wait = perform(index, event, pace: .virtual) { _ = wait.waitUntilApplied(or: nil) }
        }
        return due.count
    }

    /// A begun interruption being applied off the stream's thread (the session stops this stream
    /// while it waits, so the stream waits for that or for the interruption to be in force).
    final class InterruptionWait: Sendable {
        private let done = Locked(false)
        func finish() { done.withLock { $0 = true } }
        /// Waits until the interruption is in force or `stop` fires; true if stopped.
        func waitUntilApplied(or stop: StopSignal?) -> Bool {
            while !done.withLock({ $0 }) {
                if stop?.isStopped == true { return true }
                usleep(500)
            }
            return stop?.isStopped == true
        }
    }

    /// Applies a device or session action (stream faults are the streams' own). An interruption
    /// returns what the firing stream waits for.
    func perform(_ index: Int, _ event: FaultEvent, pace: CapturePace) -> InterruptionWait? {
        switch event.fault {
        case .unplug: if let id = event.device { disconnect(id) }
        case .replug: if let id = event.device { connect(id) }
        case .configurationPriorityTaken(let holder): if let id = event.device { setExternalConfigurationLock(id, holder: holder) }
        case .configurationPriorityReleased: if let id = event.device { setExternalConfigurationLock(id, holder: nil) }
        case .authorization(let mediaType, let status): setAuthorizationStatus(status, for: mediaType)
        case .interruptionEnded: notifyAvailability(event.device, available: true)
        case .interruptionBegan:
            let wait = InterruptionWait()
            // The end that belongs to this begin: the next interruptionEnded of the same device.
            let end = state.withLock { s -> MediaTime? in
                guard let i = s.faults.events.indices.first(where: { i in
                    i > index && !s.firedFaults.contains(i) && s.faults.events[i].fault == .interruptionEnded
                        && s.faults.events[i].device == event.device
                }) else { return nil }
                s.firedFaults.insert(i)
                s.pendingResumes += 1
                if case .time(let t) = s.faults.events[i].at { return t }
                return .zero
            }
            let begin: MediaTime = if case .time(let t) = event.at { t } else { .zero }
            // Off the stream's thread: interrupting a session stops its streams and waits for its
            // pump, which is the thread that is running this.
            DispatchQueue.global().async {
                self.notifyAvailability(event.device, available: false)
                wait.finish()
                guard let end else { return }
                if pace == .realtime, end > begin { usleep(useconds_t(min(3_600, (end - begin).seconds) * 1_000_000)) }
                self.notifyAvailability(event.device, available: true)
                self.state.withLock { $0.pendingResumes -= 1 }
            }
            return wait
        default: break
        }
        return nil
    }

    private func notifyAvailability(_ uniqueID: String?, available: Bool) {
        for handler in state.withLock({ $0.availabilityHandlers }) { handler(uniqueID, available) }
    }

    /// Device availability changes from interruptions (nil ID: every device).
    func addAvailabilityHandler(_ handler: @escaping @Sendable (String?, Bool) -> Void) {
        state.withLock { $0.availabilityHandlers.append(handler) }
    }

    /// Virtual pace: how long (wall time) a simulated camera waits for a consumer to return one of
    /// its buffers before it reports `buffersNotReturned` (default 10 s: far beyond any honest
    /// consumer's delay, short enough to end a deadlocked test).
    public var bufferStarvationTimeout: Duration {
        get { state.withLock { $0.bufferStarvationTimeout } }
        set { state.withLock { $0.bufferStarvationTimeout = newValue } }
    }

    /// Virtual pace: whether a simulated camera renders its next frame on a second thread while the
    /// current one is delivered (default true). The frames are the same either way (a frame rendered
    /// ahead is used only if nothing it was made from changed); off is for comparing the two.
    public var rendersAhead: Bool {
        get { state.withLock { $0.rendersAhead } }
        set { state.withLock { $0.rendersAhead = newValue } }
    }

    /// Frames rendered ahead so far: used as rendered, and thrown away (something they were made
    /// from changed, e.g. a control set while the frame before was delivered).
    public var renderAheadCounts: (used: Int, discarded: Int) { state.withLock { $0.renderAheadCounts } }

    /// Frames rendered ahead whose render the delivering thread did itself, because the render
    /// queue had not begun it when the frame was due.
    package var renderAheadByDeliverer: Int { state.withLock { $0.renderAheadByDeliverer } }

    /// Tests: frames planned ahead are not handed to the render queue, so the delivering thread
    /// renders every one of them itself (the path taken when the queue's worker has no core yet).
    package var leavesRenderAheadToDeliverer: Bool {
        get { state.withLock { $0.leavesRenderAheadToDeliverer } }
        set { state.withLock { $0.leavesRenderAheadToDeliverer = newValue } }
    }

    func countRenderAheadByDeliverer() { state.withLock { $0.renderAheadByDeliverer += 1 } }

    func countRenderAhead(used: Bool) {
        state.withLock { if used { $0.renderAheadCounts.used += 1 } else { $0.renderAheadCounts.discarded += 1 } }
    }

    func requireAuthorization(_ mediaType: MediaType) throws(CaptureError) {
        let status = authorizationStatus(for: mediaType)
        guard status == .authorized else { throw .notAuthorized(mediaType: mediaType.rawValue, status: status.rawValue) }
    }
}

/// An opened simulated microphone.
final class SimulatedMicrophone: DriverDevice {
    let profile: SimulatedDeviceProfile
    let format: AudioStreamFormat
    let tone: SyncToneSpec
    let scenario: SimulatorScenario

    init(profile: SimulatedDeviceProfile, format: AudioStreamFormat, tone: SyncToneSpec, scenario: SimulatorScenario) {
        self.profile = profile
        self.format = format
        self.tone = tone
        self.scenario = scenario
    }

    var description: DeviceDescription { profile.deviceDescription }

    func acquireConfigurationPriority() throws(CaptureError) {
        if let holder = scenario.externalLockHolder(profile.uniqueID) { throw .lockedByAnotherClient(device: profile.uniqueID, holder: holder) }
    }

    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        try scenario.requireAuthorization(.audio)
        guard description.formats.contains(configuration.format) else {
            throw .formatNotSupported("\(configuration.format.formatDescription) on \(profile.uniqueID)")
        }
        var sources: [Int: ToneGenerator] = [:]
        for source in profile.port.dataSources {
            var spec = tone
            spec.toneFrequency = source.frequency
            sources[source.description.dataSourceID] = ToneGenerator(spec: spec, sampleRate: format.sampleRate)
        }
        return SimulatedAudioStream(format: format, generator: ToneGenerator(spec: tone, sampleRate: format.sampleRate),
                                    framesPerBuffer: configuration.audioFramesPerBuffer, pace: configuration.pace,
                                    uniqueID: profile.uniqueID, scenario: scenario, dataSources: sources,
                                    defaultDataSource: profile.port.defaultDataSourceID)
    }
}

/// What a simulated video stream renders with: rebuilt when the format changes while it runs.
final class SimulatedStreamSetup: Sendable {
    let configuration: StreamConfiguration
    let renderer: SyntheticFrameRenderer
    let pool: PixelBufferPool
    let format: FormatDescription
    /// MJPEG: frames are rendered into `scratch` (I420) and compressed into the pool's buffers.
    let compression: (compressor: any FrameCompressor, scratch: PixelBuffer)?

    init(configuration: StreamConfiguration, renderer: SyntheticFrameRenderer, compressor: (any FrameCompressor)?) {
        self.configuration = configuration
        self.renderer = renderer
        let delivered = compressor == nil ? renderer.pixelFormat : PixelFormat.mjpeg
        // Bounded like a V4L2 buffer queue: consumers that hold frames starve it (frames then drop).
        pool = PixelBufferPool(format: delivered, width: renderer.width, height: renderer.height,
                               maximumBufferCount: SimulatedVideoStream.bufferCount(width: renderer.width, height: renderer.height))
        format = .video(pixelFormat: delivered, dimensions: Dimensions(width: renderer.width, height: renderer.height))
        compression = compressor.map { ($0, PixelBuffer(format: renderer.pixelFormat, width: renderer.width, height: renderer.height)) }
    }

    /// The same pixels at another frame duration.
    func with(frameDuration: MediaTime) -> SimulatedStreamSetup {
        var configuration = self.configuration
        configuration.frameDuration = frameDuration
        return SimulatedStreamSetup(configuration: configuration, reusing: self)
    }

    private init(configuration: StreamConfiguration, reusing other: SimulatedStreamSetup) {
        self.configuration = configuration
        renderer = other.renderer
        pool = other.pool
        format = other.format
        compression = other.compression
    }
}

/// Frames from a simulated camera: each frame takes the camera's control state in effect when it
/// starts, is rendered through it, and reports back. PTS advance by the frame duration, or by the
/// exposure time when that is longer (plus the start time in real time).
///
/// Live reconfiguration: a new format or frame duration (`reconfigure`) takes effect at the next
/// frame boundary: the next frame starts where the previous one ended, is rendered in the new format
/// (a new buffer pool; buffers of the old one still held by consumers stay valid) and lasts the new
/// duration; frame indices (the stamps) continue.
final class SimulatedVideoStream: ReconfigurableStream {
    private let camera: SimulatedCamera
    private let stopSignal = StopSignal()
    private let state = Locked<(next: Int64, offset: MediaTime, previous: MediaTime?, anchor: MediaTime)>((0, .zero, nil, .zero))
    private let setup: Locked<SimulatedStreamSetup>
    private let pending = Locked<(setup: SimulatedStreamSetup, applied: [@Sendable (MediaTime) -> Void])?>(nil)
    private let faults = Locked<SimulatorScenario.VideoFaults?>(nil)
    private let timeline = Locked(VideoFaultState())

    /// What the scenario's `FaultTimeline` has done to this stream so far.
    struct VideoFaultState {
        var origin = MediaTime.zero
        var registered = false
        var dropRemaining = 0
        var jitterLimit: Int64 = 0
        var jitterEnd = Int64.max
        /// Frames starting before this point of the fault clock are lost (a stall).
        var stallUntil: MediaTime?
        var corruptions: [FrameCorruption] = []
        var duplicateNext = false
        var duplicate: SampleBuffer?
        /// Frames still to hand back flagged as failed (`bufferError`).
        var bufferErrors = 0
    }

    /// Virtual pace: the next frame, rendered on `renderQueue` while this one is delivered (and
    /// encoded), so rendering and encoding overlap (or by the delivering thread, if the queue has
    /// not begun it when it is due). It is used only if it is exactly the frame this
    /// stream would render at its turn: same index, setup and timing, and the camera's state untouched
    /// since it was planned (`SimulatedCamera.commit`: no control set, no frame begun or ended).
    /// Otherwise it is thrown away and the frame rendered again, so frames never depend on it.
    private final class FrameAhead: Sendable {
        let index: Int64
        let offset: MediaTime
        let previous: MediaTime?
        let setup: SimulatedStreamSetup
        let buffer: PixelBuffer
        let planned: SimulatedCamera.PlannedFrame
        /// Written by whoever claimed the render, before `rendered` is signalled; read only after
        /// waiting for it.
        var measurements: FrameMeasurements? { result.withLock { $0 } }
        private let result = Locked<FrameMeasurements?>(nil)
        let rendered = DispatchSemaphore(value: 0)
        /// The render: run once, by `renderQueue` or by the delivering thread, whichever claims it first.
        private let render: @Sendable () -> FrameMeasurements
        private let claimed = Locked(false)

        init(index: Int64, offset: MediaTime, previous: MediaTime?, setup: SimulatedStreamSetup, buffer: PixelBuffer,
             planned: SimulatedCamera.PlannedFrame, render: @escaping @Sendable () -> FrameMeasurements) {
            self.index = index
            self.offset = offset
            self.previous = previous
            self.setup = setup
            self.buffer = buffer
            self.planned = planned
            self.render = render
        }

        /// Takes the render for the caller: true once, for the first to ask.
        private func claim() -> Bool { claimed.withLock { c in defer { c = true }; return !c } }

        /// Renders the frame if nobody has begun to; false if someone has.
        func runIfUnclaimed() -> Bool {
            guard claim() else { return false }
            let measured = render()
            result.withLock { $0 = measured }
            rendered.signal()
            return true
        }

        /// The render's result: rendered here if `renderQueue` has not begun it yet (with x264's
        /// threads holding both cores, the queue's worker could wait a scheduler slice or more for
        /// one while this thread, already running, stalls the encoder's input), otherwise waited
        /// for. Either way the renderer is free again on return. True if it rendered here.
        func finish() -> Bool {
            if runIfUnclaimed() { return true }
            wait()
            return false
        }

        /// The frame is not wanted: nobody renders it if nobody has begun to; a render under way is
        /// waited for.
        func cancel() {
            if claim() { rendered.signal() } else { wait() }
        }

        /// Waits for the render (the renderer is then free again).
        func wait() { rendered.wait(); rendered.signal() }
    }
    private let ahead = Locked<FrameAhead?>(nil)
    private let renderQueue = DispatchQueue(label: "CaptureSimulator.renderAhead")

    init(camera: SimulatedCamera, setup: SimulatedStreamSetup) {
        self.camera = camera
        self.setup = Locked(setup)
    }

    /// The shake of frame `index` as the plan asks for it (nil: none).
    private func motion(_ plan: SimulatedCamera.FramePlan, index: Int64) -> FrameMotion? {
        guard plan.shakeAmplitude > 0 || plan.stabilization != .off else { return nil }
        return CameraShake.motion(seed: camera.seed ^ SimulatorDriver.hash(camera.profile.uniqueID), frame: index,
                                  amplitude: plan.shakeAmplitude, mode: plan.stabilization)
    }

    /// Starts rendering frame `index` ahead (virtual pace, uncompressed frames, a free buffer).
    private func renderAhead(index: Int64, offset: MediaTime, previous: MediaTime?, setup: SimulatedStreamSetup) {
        guard setup.configuration.pace == .virtual, setup.compression == nil, camera.scenario.rendersAhead,
              pending.withLock({ $0 == nil }), !stopSignal.isStopped, let buffer = setup.pool.makeBuffer() else { return }
        // Planned here, on the delivering thread, so a control set after this call (while this
        // frame is delivered) always voids the frame rendered ahead, whenever the render runs.
        let configuration = setup.configuration, renderer = setup.renderer
        let planned = camera.planAhead(format: configuration.format, frameDuration: configuration.frameDuration,
                                       width: renderer.width, height: renderer.height)
        let plan = planned.plan, motion = self.motion(plan, index: index)
        let frame = FrameAhead(index: index, offset: offset, previous: previous, setup: setup, buffer: buffer, planned: planned) {
            renderer.render(frame: index, effects: plan.effects, syncFlash: SyntheticFrameRenderer.showsSyncFlash(offset: offset, previous: previous),
                            metering: plan.metering, motion: motion, into: buffer, items: plan.items)
        }
        ahead.withLock { $0 = frame }
        if !camera.scenario.leavesRenderAheadToDeliverer { renderQueue.async { _ = frame.runIfUnclaimed() } }
    }

    /// The frame rendered ahead, if it is frame `index` at `offset` in `setup` and the camera could
    /// begin it as planned (its state then moves exactly as `beginFrame` would move it), rendered
    /// here if the render queue has not begun it; a frame not wanted is never begun or is waited
    /// for, so either way the renderer is free on return.
    private func takeAhead(index: Int64, offset: MediaTime, previous: MediaTime?, setup: SimulatedStreamSetup) -> FrameAhead? {
        guard let frame = ahead.withLock({ a in defer { a = nil }; return a }) else { return nil }
        // Whether it is still the frame to deliver does not depend on its pixels, so a frame the
        // queue has not begun is dropped unrendered, and one it has begun is waited for.
        guard frame.index == index, frame.offset == offset, frame.previous == previous, frame.setup === setup,
              camera.commit(frame.planned) else {
            frame.cancel()
            camera.scenario.countRenderAhead(used: false)
            return nil
        }
        if frame.finish() { camera.scenario.countRenderAheadByDeliverer() }
        camera.scenario.countRenderAhead(used: true)
        return frame
    }

    func reconfigure(_ change: StreamReconfiguration) throws(CaptureError) {
        let current = pending.withLock { $0?.setup } ?? setup.withLock { $0 }
        let next: SimulatedStreamSetup
        if change.format == current.configuration.format {
            guard change.format.supports(frameDuration: change.frameDuration) else {
                throw .formatNotSupported("frame duration \(change.frameDuration) on \(change.format.formatDescription)")
            }
            next = current.with(frameDuration: change.frameDuration)
        } else {
            var configuration = current.configuration
            configuration.format = change.format
            configuration.frameDuration = change.frameDuration
            next = try camera.makeSetup(configuration)
        }
        pending.withLock { p in p = (next, (p?.applied ?? []) + [change.applied]) }
    }

    /// Real time: PTS on the host clock from `hostTime`; virtual time: from the session's virtual now.
    func start(at hostTime: MediaTime) throws(CaptureError) {
        state.withLock { $0 = (0, .zero, nil, hostTime) }
        if let stale = ahead.withLock({ a in defer { a = nil }; return a }) { stale.cancel() }
        faults.withLock { $0 = camera.scenario.videoFaults(camera.profile.uniqueID) }
        let origin = camera.scenario.faultClock(startingAt: hostTime, device: camera.profile.uniqueID)
        timeline.withLock { $0 = VideoFaultState(origin: origin, registered: true) }
    }

    /// Applies the timeline's events due at frame `index` (starting at `start`); true if the
    /// stream was stopped while an interruption it fired took effect.
    private func applyDueFaults(index: Int64, start: MediaTime, pace: CapturePace) -> Bool {
        let origin = timeline.withLock { $0.origin }
        let elapsed = start - origin
        for (number, event) in camera.scenario.takeDueFaults(device: camera.profile.uniqueID, elapsed: elapsed, frame: index) {
            switch event.fault {
            case .dropFrames(let count): timeline.withLock { $0.dropRemaining += count }
            case .jitter(let microseconds, let frames):
                timeline.withLock {
                    $0.jitterLimit = microseconds
                    $0.jitterEnd = frames == 0 ? .max : index + Int64(frames)
                }
            case .stall(let milliseconds):
                let from: MediaTime = if case .time(let t) = event.at { t } else { elapsed }
                timeline.withLock { $0.stallUntil = from + MediaTime(value: Int64(milliseconds), timescale: 1000) }
            case .corruptFrame(let kind): timeline.withLock { $0.corruptions.append(kind) }
            case .duplicateFrame: timeline.withLock { $0.duplicateNext = true }
            case .bufferError: timeline.withLock { $0.bufferErrors += 1 }
            default:
                if let wait = camera.scenario.perform(number, event, pace: pace), wait.waitUntilApplied(or: stopSignal) { return true }
            }
        }
        return false
    }

    /// Whether the timeline loses frame `index` starting at `start` (a drop burst or a stall).
    private func timelineLoses(index: Int64, start: MediaTime) -> Bool {
        timeline.withLock { s in
            if s.dropRemaining > 0 {
                s.dropRemaining -= 1
                return true
            }
            if let until = s.stallUntil {
                if start - s.origin < until { return true }
                s.stallUntil = nil
            }
            return false
        }
    }

    /// Damages a compressed frame as scripted: cut in half after its headers (EOI lost), its SOI
    /// marker overwritten, or its entropy-coded data replaced by seeded random bytes.
    static func damage(_ buffer: PixelBuffer, _ kind: FrameCorruption, seed: UInt64) throws(CaptureError) {
        var bytes = buffer.withCompressedData { Array($0) }
        guard bytes.count > 4 else { return }
        // The entropy-coded data starts after the SOS segment.
        var dataStart = 2
        if let sos = (0..<(bytes.count - 3)).first(where: { bytes[$0] == 0xFF && bytes[$0 + 1] == 0xDA }) {
            dataStart = min(bytes.count - 2, sos + 2 + (Int(bytes[sos + 2]) << 8 | Int(bytes[sos + 3])))
        }
        switch kind {
        case .truncated:
            bytes.removeSubrange((dataStart + (bytes.count - dataStart) / 2)...)
        case .badMarker:
            bytes[0] = 0x00
            bytes[1] = 0x00
        case .garbage:
            var random = SeededRandom(seed: seed)
            for i in dataStart..<(bytes.count - 2) {
                // No 0xFF: the damage stays inside the entropy-coded data (no stray markers).
                let byte = UInt8(truncatingIfNeeded: random.next())
                bytes[i] = byte == 0xFF ? 0xFE : byte
            }
        }
        let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
        defer { copy.deallocate() }
        copy.copyBytes(from: bytes)
        try buffer.setCompressedData(UnsafeRawBufferPointer(copy))
    }

    /// The scripted jitter of frame `index`: uniform in ±`limit` µs, from (seed, device, index).
    private func jitter(_ index: Int64, limit: Int64) -> MediaTime {
        guard limit > 0 else { return .zero }
        var random = SeededRandom(seed: camera.seed ^ SimulatorDriver.hash(camera.profile.uniqueID) ^ (UInt64(bitPattern: index) &* 0x9e37_79b9_7f4a_7c15))
        let span = UInt64(2 * limit + 1)
        return MediaTime(value: Int64(random.next() % span) - limit, timescale: 1_000_000)
    }

    /// Buffers in the stream's pool, as many as a typical V4L2 capture queue.
    static let bufferCount = 8

    /// The pool's size for a frame size: `bufferCount`, but at most about 48 MB of frames (never
    /// fewer than 4), as drivers queue fewer buffers of a 4K frame: 8 up to 1080p, 4 at 3840x2160.
    static func bufferCount(width: Int, height: Int) -> Int {
        let frameBytes = max(1, width * height * 3 / 2)
        return min(bufferCount, max(4, (48 << 20) / frameBytes))
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        // A scripted duplicate: the frame just delivered, again (same pixels, sequence number, PTS).
        if let duplicate = timeline.withLock({ s in defer { s.duplicate = nil }; return s.duplicate }) {
            return stopSignal.isStopped ? nil : duplicate
        }
        var lost = 0
        var scriptedLoss = false
        var applied: [@Sendable (MediaTime) -> Void] = []
        while true {
            if stopSignal.isStopped { return nil }
            guard camera.scenario.isPluggedIn(camera.profile.uniqueID) else { throw .deviceDisconnected(camera.profile.uniqueID) }
            let (index, offset, previous, anchor) = state.withLock { ($0.next, $0.offset, $0.previous, $0.anchor) }
            // The fault timeline's events due at this frame (an unplug makes it the first one lost).
            if applyDueFaults(index: index, start: anchor + offset, pace: self.setup.withLock { $0.configuration.pace }) { return nil }
            guard camera.scenario.isPluggedIn(camera.profile.uniqueID) else { throw .deviceDisconnected(camera.profile.uniqueID) }
            // A frame boundary: a pending reconfiguration applies from this frame on (its handlers
            // fire with the first frame delivered, past any lost ones).
            if let change = pending.withLock({ p in defer { p = nil }; return p }) {
                setup.withLock { $0 = change.setup }
                applied += change.applied
            }
            let setup = self.setup.withLock { $0 }
            let configuration = setup.configuration, renderer = setup.renderer, compression = setup.compression
            let early = takeAhead(index: index, offset: offset, previous: previous, setup: setup)
            let plan = early?.planned.plan ?? camera.beginFrame(format: configuration.format, frameDuration: configuration.frameDuration,
                                                                  width: renderer.width, height: renderer.height)
            let step = plan.exposureSeconds > configuration.frameDuration.seconds
                ? MediaTime(seconds: plan.exposureSeconds, preferredTimescale: 1_000_000) : configuration.frameDuration
            let faults = self.faults.withLock { $0 }
            let scripted = timeline.withLock { index < $0.jitterEnd ? $0.jitterLimit : 0 }
            let pts = anchor + offset + jitter(index, limit: max(faults?.jitterMicroseconds ?? 0, scripted))
            // Real time: a frame is available once it has been exposed, at its start time plus its
            // duration. It is rendered during that exposure (before the wait, not after it), so
            // the render's time never adds to the latency from PTS to delivery.
            let realtime = configuration.pace == .realtime
            var exposed = false
            state.withLock { s in
                s.next = index + 1
                s.previous = offset
                s.offset = offset + step
            }
            if faults?.droppedFrames.contains(index) == true || timelineLoses(index: index, start: anchor + offset) {
                // A scripted device drop: the frame is never delivered; the next one reports the gap.
                lost += 1
                scriptedLoss = true
                continue
            }
            if timeline.withLock({ s in guard s.bufferErrors > 0 else { return false }; s.bufferErrors -= 1; return true }) {
                // A buffer the driver flagged as failed: lost like a drop, reported as corrupt data (as V4L2 does).
                camera.scenario.deviceEvents.post(.samplesDropped(deviceID: camera.profile.uniqueID, reason: .corruptData, count: 1,
                                                                  presentationTime: pts))
                lost += 1
                scriptedLoss = true
                continue
            }
            var acquired: PixelBuffer?
            if let early { acquired = early.buffer } else { acquired = try acquireBuffer(setup) }
            if acquired == nil && realtime {
                // No free buffer yet: a consumer may return one before the exposure ends.
                guard stopSignal.sleep(untilHostTime: pts + step) else { return nil }
                exposed = true
                acquired = try acquireBuffer(setup)
            }
            guard let buffer = acquired else {
                if stopSignal.isStopped { return nil }
                // Real time: every buffer is held by a consumer, so this frame is lost, as on a device.
                lost += 1
                continue
            }
            let measurements = early?.measurements ?? renderer.render(
                frame: index, effects: plan.effects, syncFlash: SyntheticFrameRenderer.showsSyncFlash(offset: offset, previous: previous),
                metering: plan.metering, motion: motion(plan, index: index), into: compression?.scratch ?? buffer, items: plan.items)
            if !plan.items.isEmpty {
                camera.scenario.recordSceneTruth(camera.profile.uniqueID, SceneTruthFrame(
                    frameIndex: index, presentationTime: pts, frameSize: Dimensions(width: renderer.width, height: renderer.height),
                    items: renderer.sceneTruth(frame: index, items: plan.items, zoom: plan.effects.zoom)))
            }
            if let compression { try compression.compressor.compress(compression.scratch, into: buffer) }
            if let corruption = timeline.withLock({ s in s.corruptions.isEmpty ? nil : s.corruptions.removeFirst() }), compression != nil {
                try Self.damage(buffer, corruption, seed: camera.seed ^ SimulatorDriver.hash(camera.profile.uniqueID) ^ UInt64(bitPattern: index))
            }
            camera.endFrame(plan, measurements: measurements, presentationTime: pts)
            if realtime && !exposed {
                guard stopSignal.sleep(untilHostTime: pts + step) else { return nil }
            }
            for handler in applied { handler(pts) }
            let sample = SampleBuffer(payload: .pixels(buffer), formatDescription: setup.format,
                                      presentationTime: pts, duration: step, sequenceNumber: index,
                                      discontinuity: lost > 0 ? Discontinuity(count: lost, reason: scriptedLoss ? .discontinuity : .outOfBuffers) : nil)
            timeline.withLock { s in
                if s.duplicateNext {
                    s.duplicateNext = false
                    s.duplicate = SampleBuffer(payload: .pixels(buffer), formatDescription: setup.format,
                                               presentationTime: pts, duration: step, sequenceNumber: index)
                }
            }
            renderAhead(index: index + 1, offset: offset + step, previous: offset, setup: setup)
            return sample
        }
    }

    /// Real time: a buffer now, or nil and the frame is lost. Virtual time: virtual time stops
    /// until a consumer returns a buffer, however long that takes, so what is captured never
    /// depends on how fast consumers are; nil only when stopped. A consumer that keeps every
    /// buffer for `scenario.bufferStarvationTimeout` of wall time is reported as a deadlock
    /// (`buffersNotReturned`: the session posts it as a runtime error and stops).
    private func acquireBuffer(_ setup: SimulatedStreamSetup) throws(CaptureError) -> PixelBuffer? {
        let pool = setup.pool
        guard setup.configuration.pace == .virtual else { return pool.makeBuffer() }
        let timeout = camera.scenario.bufferStarvationTimeout
        switch pool.waitForBuffer(timeout: timeout, isCancelled: { stopSignal.isStopped }) {
        case .buffer(let buffer): return buffer
        case .cancelled: return nil
        case .timedOut:
            throw .buffersNotReturned(device: camera.profile.uniqueID, buffers: pool.maximumBufferCount ?? Self.bufferCount,
                                      seconds: Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18)
        }
    }

    func stop() {
        stopSignal.stop()
        setup.withLock { $0 }.pool.wakeWaiters()
        if timeline.withLock({ s in defer { s.registered = false }; return s.registered }) {
            camera.scenario.streamStopped(device: camera.profile.uniqueID)
        }
    }
}

/// Tone buffers: PTS exactly `firstSample / sampleRate` (plus the start time in real time).
final class SimulatedAudioStream: DriverStream {
    private let format: AudioStreamFormat
    private let generator: ToneGenerator
    private let framesPerBuffer: Int
    private let pace: CapturePace
    private let uniqueID: String
    private let scenario: SimulatorScenario
    private let stopSignal = StopSignal()
    private let state = Locked<(next: Int64, anchor: MediaTime)>((0, .zero))

    private let dataSources: [Int: ToneGenerator]
    private let defaultDataSource: Int?

    init(format: AudioStreamFormat, generator: ToneGenerator, framesPerBuffer: Int, pace: CapturePace,
         uniqueID: String, scenario: SimulatorScenario, dataSources: [Int: ToneGenerator] = [:], defaultDataSource: Int? = nil) {
        self.dataSources = dataSources
        self.defaultDataSource = defaultDataSource
        self.format = format
        self.generator = generator
        self.framesPerBuffer = framesPerBuffer
        self.pace = pace
        self.uniqueID = uniqueID
        self.scenario = scenario
    }

    /// What the scenario's `FaultTimeline` has done to this stream: its clock's zero, and the
    /// drifting sample clock (sample `n` ≥ `driftStart` carries the scene's sample
    /// `contentBase + (n − driftStart) / (1 + ppm·10⁻⁶)`).
    private struct AudioFaultState {
        var origin = MediaTime.zero
        var registered = false
        var driftPPM = 0.0
        var driftStart: Int64 = 0
        var contentBase: Int64 = 0

        func content(_ n: Int64) -> Int64 {
            guard driftPPM != 0 else { return contentBase + n - driftStart }
            return contentBase + Int64((Double(n - driftStart) / (1 + driftPPM / 1_000_000)).rounded())
        }
    }
    private let timeline = Locked(AudioFaultState())

    func start(at hostTime: MediaTime) throws(CaptureError) {
        state.withLock { $0 = (0, hostTime) }
        let origin = scenario.faultClock(startingAt: hostTime, device: uniqueID)
        timeline.withLock { $0 = AudioFaultState(origin: origin, registered: true) }
    }

    func nextSample() throws(CaptureError) -> SampleBuffer? {
        if stopSignal.isStopped { return nil }
        guard scenario.isPluggedIn(uniqueID) else { throw .deviceDisconnected(uniqueID) }
        let rate = Int32(format.sampleRate)
        // The fault timeline's events due at this buffer: a gap skips samples (the PTS jumps and the
        // buffer reports them lost), a drift bends the sample clock, actions fire.
        var skipped: Int64 = 0
        let (next, anchorNow) = state.withLock { ($0.next, $0.anchor) }
        let origin = timeline.withLock { $0.origin }
        let startTime = anchorNow + MediaTime(value: next, timescale: rate)
        for (number, event) in scenario.takeDueFaults(device: uniqueID, elapsed: startTime - origin, frame: nil) {
            switch event.fault {
            case .audioGap(let milliseconds): skipped += Int64(milliseconds) * Int64(rate) / 1000
            case .clockDrift(let ppm):
                timeline.withLock { t in
                    let at = next + skipped
                    t.contentBase = t.content(at)
                    t.driftStart = at
                    t.driftPPM = ppm
                }
            default:
                if let wait = scenario.perform(number, event, pace: pace), wait.waitUntilApplied(or: stopSignal) { return nil }
            }
        }
        guard scenario.isPluggedIn(uniqueID) else { throw .deviceDisconnected(uniqueID) }
        let (first, anchor) = state.withLock { s in
            s.next += skipped
            defer { s.next += Int64(framesPerBuffer) }
            return (s.next, s.anchor)
        }
        let clock = timeline.withLock { $0 }
        let pts = anchor + MediaTime(value: first, timescale: rate)
        let duration = MediaTime(value: Int64(framesPerBuffer), timescale: rate)
        if pace == .realtime {
            guard stopSignal.sleep(untilHostTime: pts + duration) else { return nil }
        }
        let buffer = AudioPCMBuffer(format: format, frameCapacity: framesPerBuffer)
        // The data source selected now and the gain stage, as the audio session set them.
        let settings = scenario.microphoneSettings(uniqueID)
        let generator = (settings.dataSourceID ?? defaultDataSource).flatMap { dataSources[$0] } ?? self.generator
        let gain = settings.gain
        let drifting = clock.driftPPM != 0
        buffer.withProducerBytes { raw in
            switch format.sampleFormat {
            case .float32:
                let out = raw.baseAddress!.assumingMemoryBound(to: Float.self)
                if drifting {
                    for n in 0..<framesPerBuffer {
                        let v = generator.sample(clock.content(first + Int64(n)))
                        for c in 0..<format.channelCount { out[n * format.channelCount + c] = v }
                    }
                } else {
                    generator.fill(out, first: clock.content(first), count: framesPerBuffer, channels: format.channelCount)
                }
                if gain != 1 { for i in 0..<(framesPerBuffer * format.channelCount) { out[i] *= gain } }
            case .int16:
                let out = raw.baseAddress!.assumingMemoryBound(to: Int16.self)
                for n in 0..<framesPerBuffer {
                    let v = Int16(max(-32768, min(32767, (generator.sample(clock.content(first + Int64(n))) * gain * 32767).rounded())))
                    for c in 0..<format.channelCount { out[n * format.channelCount + c] = v }
                }
            }
        }
        return SampleBuffer(payload: .audio(buffer), formatDescription: .audio(format),
                            presentationTime: pts, duration: duration, sequenceNumber: first,
                            discontinuity: skipped > 0 ? Discontinuity(count: Int(skipped), reason: .discontinuity) : nil)
    }

    func stop() {
        stopSignal.stop()
        if timeline.withLock({ s in defer { s.registered = false }; return s.registered }) { scenario.streamStopped(device: uniqueID) }
    }
}
