import Testing
@testable import CaptureCore

/// A minimal in-test driver: the SPI is implementable without the simulator.
private struct StubDriver: CaptureDriver {
    let scheme = "stub"
    func discoverDevices() throws(CaptureError) -> [DeviceDescription] {
        [DeviceDescription(uniqueID: "stub:cam", localizedName: "Stub", modelID: "stub", mediaType: .video, position: .front,
                           formats: [
                               DeviceFormat(formatDescription: .video(pixelFormat: .nv12, dimensions: Dimensions(width: 640, height: 480)),
                                            frameRateRanges: [FrameRateRange(minRate: 1, maxRate: 30)]),
                               DeviceFormat(formatDescription: .video(pixelFormat: .nv12, dimensions: Dimensions(width: 1280, height: 720)),
                                            frameRateRanges: [FrameRateRange(minRate: 5, maxRate: 60)]),
                           ])]
    }
    func openDevice(uniqueID: String) throws(CaptureError) -> any DriverDevice {
        guard let description = try discoverDevices().first(where: { $0.uniqueID == uniqueID }) else { throw .deviceNotFound(uniqueID) }
        return StubDevice(description: description)
    }
}

/// The configuration lock reaches the driver (`acquireConfigurationPriority`), so the stub opens.
private final class StubDevice: DriverDevice {
    let description: DeviceDescription
    init(description: DeviceDescription) { self.description = description }
    func makeStream(_ configuration: StreamConfiguration) throws(CaptureError) -> any DriverStream {
        throw .formatNotSupported("the stub does not stream")
    }
}

@Suite struct DeviceTests {
    let registry = DeviceRegistry(drivers: [StubDriver()])

    /// The generation guard: a stop that a run asks for itself (a stream failed or ended, a pump
    /// thread called `stopRunning`) arrives from another thread, possibly after the app has
    /// stopped and started again; it must not stop the new run.
    @Test func aLateStopFromAnEarlierRunDoesNotStopTheNextOne() throws {
        let session = CaptureSession()
        try session.startRunning()
        let first = session.runGeneration
        session.stopRunning()
        try session.startRunning()
        #expect(session.runGeneration != first)
        session.stop(generation: first)
        #expect(session.isRunning, "a stop meant for the first run stopped the second")
        session.stop(generation: session.runGeneration)
        #expect(!session.isRunning)
    }

    @Test func registryReturnsOneObjectPerDevice() throws {
        let a = try registry.device(uniqueID: "stub:cam")
        let b = try registry.device(uniqueID: "stub:cam")
        #expect(a === b)
        #expect(registry.defaultDevice(for: .video) === a)
        #expect(registry.defaultDevice(for: .audio) == nil)
        #expect(throws: CaptureError.deviceNotFound("stub:nope")) { try registry.device(uniqueID: "stub:nope") }
    }

    @Test func formatAndFrameDurationNeedTheLockAndValidRanges() throws {
        let device = try registry.device(uniqueID: "stub:cam")
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 30))
        let hd = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 60))
        #expect(throws: CaptureError.self) { try device.setActiveFormat(hd) }
        try device.lockForConfiguration()
        try device.setActiveFormat(hd)
        // A new format resets the duration to its default: 30 fps where the format allows it.
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 30))
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 60))
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 60))
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 24))
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 24))
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 120)) }
        try device.setActiveVideoMinFrameDuration(.invalid)
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 30))
        device.unlockForConfiguration()
        #expect(throws: CaptureError.self) { try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 30)) }
        #expect(device.format(matching: Dimensions(width: 640, height: 480), frameRate: 60) == nil)
    }
}
