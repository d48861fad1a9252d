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

