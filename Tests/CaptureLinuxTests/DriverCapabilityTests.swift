import CaptureKit
import Testing
@testable import CaptureALSA
@testable import CaptureV4L2

/// A `DeviceRegistry` asks each driver for its optional capabilities (`asEventReporting`,
/// `asHotPlug`, `asAvailabilityReporting`) instead of casting it. Every driver must answer what a
/// cast would: the protocol's default when it adopts the protocol, nil when it does not.
struct DriverCapabilityTests {
    @Test func everyDriverAnswersItsCapabilitiesAsACastWould() {
        let drivers: [any CaptureDriver] = [SimulatorDriver(seed: 1), LoopbackDriver(speaker: .shared), FixtureDriver(),
                                            V4L2Driver(system: FakeCamera.live()), ALSADriver(system: FakeALSA.endless())]
        for driver in drivers {
            let name = "\(type(of: driver))"
            #expect((driver.asEventReporting != nil) == (driver is any EventReportingDriver), "\(name): event reporting")
            #expect((driver.asHotPlug != nil) == (driver is any HotPlugDriver), "\(name): hot plug")
            #expect((driver.asAvailabilityReporting != nil) == (driver is any AvailabilityReportingDriver), "\(name): availability")
            #expect(driver.asEventReporting.map { $0.scheme == driver.scheme } ?? true, "\(name): the driver itself")
        }
        // What the registry relies on: the simulator's hot plug and interruptions, the kernel backends' events.
        #expect(drivers[0].asHotPlug != nil && drivers[0].asAvailabilityReporting != nil)
        #expect(drivers[3].asEventReporting != nil && drivers[4].asEventReporting != nil)
        #expect(drivers[2].asEventReporting == nil && drivers[2].asHotPlug == nil)
    }
}
