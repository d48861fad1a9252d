import CaptureCore
import Foundation

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
