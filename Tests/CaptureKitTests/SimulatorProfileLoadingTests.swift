import CaptureKit
import Testing

/// The simulator's profiles load when one of its devices is first asked for, so a process that
/// records from a real camera with the default registry never parses them — and a device whose
/// profile starts unplugged still starts unplugged, however late that is.
@Suite struct SimulatorProfileLoadingTests {
    @Test func profilesLoadWhenASimulatedDeviceIsFirstAskedFor() throws {
        let scenario = SimulatorScenario()
        let registry = CaptureKit.makeRegistry(seed: 1, scenario: scenario)
        let simulator = try #require(registry.drivers.compactMap { $0 as? SimulatorDriver }.first)
        #expect(!simulator.hasLoadedProfiles, "making the registry loaded the profiles")

        // A device of another driver: the simulator is not asked, so nothing is parsed.
        #expect(throws: CaptureError.deviceNotFound("/dev/video97")) { try registry.device(uniqueID: "/dev/video97") }
        #expect(!simulator.hasLoadedProfiles, "looking up a V4L2 device loaded the simulator's profiles")

        let camera = try registry.device(uniqueID: "sim:back")
        #expect(camera.localizedName.isEmpty == false)
        #expect(simulator.hasLoadedProfiles)

        // sim:usbmic's profile says it starts unplugged: it does, though its profile loaded late.
        #expect(!scenario.isConnected("sim:usbmic"))
        #expect(try !registry.devices(mediaType: .audio).contains { $0.uniqueID == "sim:usbmic" })
        scenario.connect("sim:usbmic")
        #expect(try registry.devices(mediaType: .audio).contains { $0.uniqueID == "sim:usbmic" })
    }

    /// Before anything asked for a device: the scenario's questions and plug changes load the
    /// profiles first, so the answers and hot-plug events are those of eager loading.
    @Test func plugStateBeforeAnyDiscoveryIsTheProfiles() throws {
        let scenario = SimulatorScenario()
        let driver = SimulatorDriver(seed: 1, scenario: scenario)
        let added = Locked<[String]>([])
        driver.addHotPlugHandler { event in
            if case .added(let description) = event { added.withLock { $0.append(description.uniqueID) } }
        }
        #expect(!driver.hasLoadedProfiles)
        scenario.connect("sim:usbmic")
        #expect(driver.hasLoadedProfiles)
        #expect(added.withLock { $0 } == ["sim:usbmic"], "plugging in a device that starts unplugged is an added event")

        let other = SimulatorScenario()
        let otherDriver = SimulatorDriver(seed: 1, scenario: other)
        withExtendedLifetime(otherDriver) {
            #expect(!other.isConnected("sim:usbmic"), "a device whose profile starts unplugged reads as unplugged")
        }
    }
}
