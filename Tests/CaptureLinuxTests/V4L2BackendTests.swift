import CaptureKitTesting
import CaptureCore
import Foundation
import Testing
@testable import CaptureV4L2

/// The V4L2 backend against a fake kernel: what it discovers, maps and streams. Each test has its
/// own fake and driver, so its own `DeviceEventCenter`. The error paths are in `V4L2ErrorPathTests`.
@Suite struct V4L2BackendTests {
    static let ms = Int64(1_000_000)

    @Test func discoveryKeepsCaptureNodesAndTheirFormats() throws {
        let driver = V4L2Driver(system: FakeCamera())
        let devices = try driver.discoverDevices()
        #expect(devices.map(\.uniqueID) == ["/dev/video0"])   // the output-only node is skipped
        let camera = try #require(devices.first)
        #expect(camera.localizedName == "Fake Camera")
        #expect(camera.modelID == "fakecam usb-0000:00:14.0-1")
        #expect(camera.position == .external)
        #expect(camera.mediaType == .video)
        // YUYV: two discrete sizes × discrete 30 and 15 fps; the Bayer format is left out;
        // NV12: stepwise sizes → ends plus common sizes on the step grid, continuous 1–60 fps.
        let yuyv = camera.formats.filter { $0.pixelFormat == .yuyv }
        #expect(yuyv.map { $0.dimensions! } == [Dimensions(width: 640, height: 480), Dimensions(width: 320, height: 240)])
        #expect(yuyv[0].frameRateRanges == [FrameRateRange(minRate: 30, maxRate: 30), FrameRateRange(minRate: 15, maxRate: 15)])
        let nv12 = camera.formats.filter { $0.pixelFormat == .nv12 }
        #expect(nv12.map { $0.dimensions!.description } == ["320x240", "640x360", "640x480", "800x600", "1280x720"])
        #expect(nv12[0].frameRateRanges == [FrameRateRange(minRate: 1, maxRate: 60)])
        #expect(!camera.formats.contains { $0.pixelFormat == PixelFormat(fourcc: "BA81") })
        #expect(camera.formats[camera.defaultFormatIndex].formatDescription == .video(pixelFormat: .yuyv, dimensions: Dimensions(width: 640, height: 480)))
        #expect(throws: CaptureError.deviceNotFound("/dev/video7")) { try driver.openDevice(uniqueID: "/dev/video7") }
    }

    @Test func controlsAreMappedAndNormalised() throws {
        let device = try V4L2Driver(system: FakeCamera()).openDevice(uniqueID: "/dev/video0")
        let ids = device.controls.map(\.id)
        #expect(ids == [.brightness, .exposureMode, .exposureDuration, .lensPosition,
                        .zoomFactor, .custom("percentage_of_dropped_buffers")])
        #expect(!ids.contains(.whiteBalanceMode))   // the device lacks it: unsupported, nothing pretends
        // Exposure in 100 µs units: 250 → 25 ms; range 0.3 ms … 204.7 ms.
        #expect(try device.value(of: .exposureDuration) == .real(0.025))
        try device.setValue(.real(0.01), for: .exposureDuration)
        #expect(try device.value(of: .exposureDuration) == .real(0.01))
        // Focus: raw 0…250 (larger = closer) → lens position 1…0.
        #expect(try device.value(of: .lensPosition) == .real(1))
        try device.setValue(.real(0), for: .lensPosition)
        #expect(try device.value(of: .lensPosition) == .real(0))
        // Exposure mode menu: Manual → custom, Aperture Priority → continuous auto.
        let mode = try #require(device.controls.first { $0.id == .exposureMode })
        #expect(mode.kind == .menu(["custom", "continuousAutoExposure"]))
        #expect(try device.value(of: .exposureMode) == .menu("continuousAutoExposure"))
        try device.setValue(.menu("custom"), for: .exposureMode)
        #expect(try device.value(of: .exposureMode) == .menu("custom"))
        // Zoom 100…500 → factor 1…5.
        try device.setValue(.real(2.5), for: .zoomFactor)
        #expect(try device.value(of: .zoomFactor) == .real(2.5))
        #expect(throws: CaptureError.self) { try device.setValue(.menu("nope"), for: .exposureMode) }
        #expect(throws: CaptureError.invalidArgument("/dev/video0 has no control whiteBalance.mode")) {
            try device.value(of: .whiteBalanceMode)
        }
    }

    @Test func recordPriorityExcludesOtherClients() throws {
        let fake = FakeCamera()
        let driver = V4L2Driver(system: fake)
        let first = try driver.openDevice(uniqueID: "/dev/video0")
        let second = try driver.openDevice(uniqueID: "/dev/video0")
        try first.acquireConfigurationPriority()
        #expect(throws: CaptureError.lockedByAnotherClient(device: "/dev/video0", holder: "another process (V4L2 record priority)")) { try second.acquireConfigurationPriority() }
        #expect(throws: CaptureError.lockedByAnotherClient(device: "/dev/video0", holder: "another process (V4L2 record priority)")) { try second.setValue(.integer(3), for: .brightness) }
        first.releaseConfigurationPriority()
        try second.acquireConfigurationPriority()
    }

    /// Two device objects for one camera (two registries, two file handles) share the process's
    /// configuration lock. Whichever unlocks last, the priority goes back through the handle that
    /// took it, so a third object can lock afterwards (the VM's compliance suite once failed here:
    /// the priority stayed on the first handle and the kernel refused the next one with EBUSY).
    @Test func thePriorityIsReleasedThroughTheHandleThatTookIt() throws {
        let fake = FakeCamera()
        func device() throws -> CaptureDevice {
            try DeviceRegistry(drivers: [V4L2Driver(system: fake)]).device(uniqueID: "/dev/video0")
        }
        let first = try device(), second = try device()
        try first.lockForConfiguration()
        try second.lockForConfiguration()   // the same client: nested
        first.unlockForConfiguration()
        second.unlockForConfiguration()
        #expect(!second.isLockedForConfiguration)
        let third = try device()
        try third.lockForConfiguration()
        #expect(third.isLockedForConfiguration)
        third.unlockForConfiguration()
    }

    @Test func streamingCopiesFramesStampsThemAndCountsDrops() throws {
        let base = 1_000 * Self.ms
        let frames: [FakeCamera.Frame] = [
            .init(sequence: 0, timestampNs: base, fill: 10),
            .init(sequence: 1, timestampNs: base + 33 * Self.ms, fill: 11),
            .init(sequence: 4, timestampNs: base + 133 * Self.ms, fill: 14),   // two frames skipped
            .init(sequence: 5, timestampNs: base + 166 * Self.ms, error: true, fill: 15),   // corrupt
            .init(sequence: 6, timestampNs: base + 200 * Self.ms, fill: 16),
        ]
        let fake = FakeCamera(frames: frames)
        let driver = V4L2Driver(system: fake)
        let device = try driver.openDevice(uniqueID: "/dev/video0")
        let id = "/dev/video0"
        let format = try #require(device.description.formats.first { $0.pixelFormat == .yuyv && $0.dimensions?.width == 640 })
        let duration = MediaTime(value: 1, timescale: 30)
        let stream = try device.makeStream(StreamConfiguration(format: format, frameDuration: duration, pace: .realtime))
        try stream.start(at: HostClock.now())
        var samples: [SampleBuffer] = []
        for _ in 0..<4 { samples.append(try #require(try stream.nextSample())) }
        stream.stop()
        #expect(try stream.nextSample() == nil)
        #expect(samples.map(\.sequenceNumber) == [0, 1, 4, 6])
        // End-of-frame stamps become start-of-frame PTS on the monotonic clock.
        #expect(samples[0].presentationTime == MediaTime(value: base, timescale: 1_000_000_000) - duration)
        #expect(samples[2].presentationTime == MediaTime(value: base + 133 * Self.ms, timescale: 1_000_000_000) - duration)
        // One copy from the driver's 1344-byte pitch into the pool's rows, bytes intact.
        let pixels = try #require(samples[1].pixelBuffer)
        #expect(pixels.format == .yuyv && pixels.width == 640 && pixels.height == 480)
        pixels.withPlane(0) { plane in
            #expect(plane[0] == 11 && plane[1279] == 11 && plane[pixels.bytesPerRow[0] * 479 + 1279] == 11)
        }
        #expect(driver.events.droppedCount(deviceID: id, reason: .discontinuity) == 2)
        #expect(driver.events.droppedCount(deviceID: id, reason: .corruptData) == 1)
        // The losses travel with the next delivered frame.
        #expect(samples.map(\.discontinuity) == [nil, nil, Discontinuity(count: 2, reason: .discontinuity),
                                                  Discontinuity(count: 1, reason: .discontinuity)])
    }

    /// Where the driver's rows are a `PixelBuffer`'s (pitch 1280 for 640-wide YUYV) and its queue
    /// keeps orphaned buffers, a frame borrows the driver's buffer: no copy, QBUF once the frame is
    /// let go; at most half the buffers are out (then frames are copies), and a frame held past
    /// the stream's stop stays readable, its buffer unmapped only when the frame goes.
    @Test func framesBorrowTheDriversBuffersAndGiveThemBack() throws {
        let base = 1_000 * Self.ms
        let frames = (0..<8).map { FakeCamera.Frame(sequence: UInt32($0), timestampNs: base + Int64($0) * 33 * Self.ms, fill: UInt8(20 + $0)) }
        let fake = FakeCamera(frames: frames, pitch: 1280, keepsOrphanedBuffers: true)
        let device = try V4L2Driver(system: fake).openDevice(uniqueID: "/dev/video0")
        let format = try #require(device.description.formats.first { $0.pixelFormat == .yuyv && $0.dimensions?.width == 640 })
        let stream = try device.makeStream(StreamConfiguration(format: format, frameDuration: MediaTime(value: 1, timescale: 30), pace: .realtime))
        try stream.start(at: HostClock.now())
        func fill(_ s: SampleBuffer) throws -> [UInt8] {
            let pixels = try #require(s.pixelBuffer)
            return pixels.withPlane(0) { [$0[0], $0[1279], $0[pixels.bytesPerRow[0] * 479 + 1279]] }
        }
        var held: [SampleBuffer] = []
        for _ in 0..<3 { held.append(try #require(try stream.nextSample())) }
        // Four buffers: two lent, then a copy (its buffer queued again at once).
        #expect(held.map { $0.pixelBuffer?.isBorrowedFromDevice } == [true, true, false])
        #expect(try held.map(fill) == [[20, 20, 20], [21, 21, 21], [22, 22, 22]])
        #expect(held[0].pixelBuffer?.bytesPerRow == [1280])
        #expect(fake.state.withLock { $0.queued.count } == 2)
        // Letting a borrowed frame go gives its buffer back at the next dequeue, and lends again.
        held.removeFirst()
        held.append(try #require(try stream.nextSample()))
        #expect(held.last?.pixelBuffer?.isBorrowedFromDevice == true)
        #expect(try fill(held[2]) == [23, 23, 23])
        #expect(fake.state.withLock { $0.queued.count } == 2)
        // Stopped with two borrowed frames held: the other two buffers are unmapped now, the
        // borrowed ones stay readable until their frames go.
        stream.stop()
        func unmapped() -> Int { fake.trace.filter { $0.call == .munmap }.count }
        #expect(unmapped() == 2)
        #expect(try held.map(fill) == [[21, 21, 21], [22, 22, 22], [23, 23, 23]])
        held.removeAll()
        #expect(unmapped() == 4)
    }

    /// A driver whose rows are padded (pitch 1344) or whose queue frees orphaned buffers gets copies.
    @Test func paddedRowsOrNoOrphanedBuffersMeanCopies() throws {
        for (pitch, orphans) in [(FakeCamera.bytesPerLine, true), (1280, false)] {
            let frames = (0..<3).map { FakeCamera.Frame(sequence: UInt32($0), timestampNs: (1_000 + Int64($0) * 33) * Self.ms, fill: UInt8(40 + $0)) }
            let fake = FakeCamera(frames: frames, pitch: pitch, keepsOrphanedBuffers: orphans)
            let device = try V4L2Driver(system: fake).openDevice(uniqueID: "/dev/video0")
            let format = try #require(device.description.formats.first { $0.pixelFormat == .yuyv && $0.dimensions?.width == 640 })
            let stream = try device.makeStream(StreamConfiguration(format: format, frameDuration: MediaTime(value: 1, timescale: 30), pace: .realtime))
            try stream.start(at: HostClock.now())
            let samples = try (0..<3).map { _ in try #require(try stream.nextSample()) }
            stream.stop()
            #expect(samples.allSatisfy { $0.pixelBuffer?.isBorrowedFromDevice == false })
            #expect(samples.map { $0.pixelBuffer?.withPlane(0) { $0[1279] } } == [40, 41, 42])
        }
    }

    /// v4l2loopback 0.12 can hand a reader a new frame under the last frame's number and number the
    /// next one two on: that repeat is a frame, not a loss, while a real gap after it still counts.
    @Test func aRepeatedNumberOnALaterFrameIsTheNextFrameNotALoss() throws {
        let base = 1_000 * Self.ms
        let fake = FakeCamera(frames: [
            .init(sequence: 0, timestampNs: base, fill: 10),
            .init(sequence: 0, timestampNs: base + 33 * Self.ms, fill: 11),   // misnumbered
            .init(sequence: 2, timestampNs: base + 66 * Self.ms, fill: 12),
            .init(sequence: 5, timestampNs: base + 166 * Self.ms, fill: 15),   // 3 and 4 lost
        ])
        let driver = V4L2Driver(system: fake)
        let device = try driver.openDevice(uniqueID: "/dev/video0")
        let format = try #require(device.description.formats.first { $0.pixelFormat == .yuyv && $0.dimensions?.width == 640 })
        let stream = try device.makeStream(StreamConfiguration(format: format, frameDuration: MediaTime(value: 1, timescale: 30), pace: .realtime))
        try stream.start(at: HostClock.now())
        var samples: [SampleBuffer] = []
        for _ in 0..<4 { samples.append(try #require(try stream.nextSample())) }
        stream.stop()
        #expect(samples.map(\.sequenceNumber) == [0, 1, 2, 5])
        #expect(samples.map(\.discontinuity) == [nil, nil, nil, Discontinuity(count: 2, reason: .discontinuity)])
        #expect(driver.events.droppedCount(deviceID: "/dev/video0", reason: .discontinuity) == 2)
    }

    /// A session delivering from the fake kernel: outputs' `didDrop` fires for a sequence gap and a
    /// corrupt buffer (both `.discontinuity`: the device lost the frames), with the PTS of the
    /// frame after the loss.
    @Test func sequenceGapsReachOutputsAsDidDrop() async throws {
        let base = 1_000 * Self.ms
        let fake = FakeCamera(frames: [
            .init(sequence: 0, timestampNs: base, fill: 10),
            .init(sequence: 3, timestampNs: base + 100 * Self.ms, fill: 13),   // 1 and 2 lost
            .init(sequence: 4, timestampNs: base + 133 * Self.ms, error: true, fill: 14),   // corrupt
            .init(sequence: 5, timestampNs: base + 166 * Self.ms, fill: 15),
        ])
        let registry = DeviceRegistry(drivers: [V4L2Driver(system: fake)])
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "/dev/video0")))
        let output = DropRecorder()
        try session.addOutput(output)
        try session.startRunning()
        defer { session.stopRunning() }
        await waitUntil(timeout: .seconds(30)) { output.frames.withLock { $0.count } >= 3 }
        session.stopRunning()
        let duration = MediaTime(value: 1, timescale: 30)
        func pts(_ ms: Int64) -> MediaTime { MediaTime(value: base + ms * Self.ms, timescale: 1_000_000_000) - duration }
        #expect(output.frames.withLock { $0 } == [0, 3, 5])
        let drops = output.drops.withLock { $0 }
        #expect(drops.count == 2)
        #expect(drops.first?.gap == Discontinuity(count: 2, reason: .discontinuity))
        #expect(drops.first?.pts == pts(100))
        #expect(drops.last?.gap == Discontinuity(count: 1, reason: .discontinuity))
        #expect(drops.last?.pts == pts(166))
    }

    @Test func startFailuresAndUnsupportedPacesAreTyped() throws {
        let fake = FakeCamera()
        let device = try V4L2Driver(system: fake).openDevice(uniqueID: "/dev/video0")
        let format = device.description.formats[0]
        let duration = MediaTime(value: 1, timescale: 30)
        #expect(throws: CaptureError.self) {
            try device.makeStream(StreamConfiguration(format: format, frameDuration: duration, pace: .virtual))
        }
        fake.inject(.streamOn, .ioError)
        let stream = try device.makeStream(StreamConfiguration(format: format, frameDuration: duration, pace: .realtime))
        #expect(throws: CaptureError.deviceStartFailed(device: "/dev/video0", reason: "VIDIOC_STREAMON: Input/output error")) {
            try stream.start(at: .zero)
        }
        // The failed start released the device: another stream can start once the fault is gone.
        let again = try device.makeStream(StreamConfiguration(format: format, frameDuration: duration, pace: .realtime))
        try again.start(at: .zero)
        again.stop()
    }

    /// A DQBUF error on a node that is still there is a streaming failure, not an unplug (the
    /// backend asks the seam whether the node exists, so the fake answers for its own nodes).
    @Test func aDequeueErrorOnAPresentNodeIsAStreamingFailure() throws {
        let fake = FakeCamera(frames: [.init(sequence: 0, timestampNs: 5_000 * Self.ms, fill: 1),
                                       .init(sequence: 1, timestampNs: 5_033 * Self.ms, fill: 2)])
        let device = try V4L2Driver(system: fake).openDevice(uniqueID: "/dev/video0")
        let stream = try device.makeStream(StreamConfiguration(format: device.description.formats[0],
                                                               frameDuration: MediaTime(value: 1, timescale: 30), pace: .realtime))
        try stream.start(at: .zero)
        #expect(try stream.nextSample() != nil)
        fake.inject(.dequeueBuffer, .ioError)
        #expect(throws: CaptureError.deviceStartFailed(device: "/dev/video0", reason: "streaming failed: VIDIOC_DQBUF: Input/output error")) {
            try stream.nextSample()
        }
        stream.stop()
    }

    @Test func unplugEndsTheStreamWithDisconnected() throws {
        let fake = FakeCamera(frames: [.init(sequence: 0, timestampNs: 5_000 * Self.ms, fill: 1)])
        let driver = V4L2Driver(system: fake)
        let device = try driver.openDevice(uniqueID: "/dev/video0")
        let stream = try device.makeStream(StreamConfiguration(format: device.description.formats[0],
                                                               frameDuration: MediaTime(value: 1, timescale: 30), pace: .realtime))
        try stream.start(at: .zero)
        #expect(try stream.nextSample() != nil)
        fake.disconnect()
        #expect(throws: CaptureError.deviceDisconnected("/dev/video0")) { try stream.nextSample() }
        #expect(driver.events.hasDisconnected(deviceID: "/dev/video0"))
        #expect(throws: CaptureError.deviceDisconnected("/dev/video0")) { try device.setValue(.integer(1), for: .brightness) }
        stream.stop()
    }
}

/// Notes each delivered frame's sequence number and each `didDrop` (the gap and the PTS of the
/// frame it came before).
private final class DropRecorder: CaptureOutput {
    let attachment = OutputAttachment()
    let frames = Locked<[Int64]>([])
    let drops = Locked<[(gap: Discontinuity, pts: MediaTime)]>([])
    func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }
    var demand: OutputDemand { .ready }
    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        frames.withLock { $0.append(sample.sequenceNumber) }
    }
    func didDrop(_ gap: Discontinuity, before sample: SampleBuffer, from connection: CaptureConnection) {
        drops.withLock { $0.append((gap, sample.presentationTime)) }
    }
    func sessionDidStop() {}
}
