import CaptureKit
import CaptureKitTesting
import Foundation
import Testing
@testable import CaptureV4L2

/// Every error path of the V4L2 backend, on the fake kernel with errno injected per call: the
/// typed `CaptureError` a user can act on, and the call trace showing what the backend did (and
/// did not do) after the failure.
@Suite struct V4L2ErrorPathTests {
    static let id = "/dev/video0"
    static let ms = Int64(1_000_000)
    static let thirtieth = MediaTime(value: 1, timescale: 30)

    static func stream(_ device: any DriverDevice) throws -> any DriverStream {
        let format = try #require(device.description.formats.first { $0.pixelFormat == .yuyv && $0.dimensions?.width == 640 })
        return try device.makeStream(StreamConfiguration(format: format, frameDuration: thirtieth, pace: .realtime))
    }

    static func frames(_ count: Int) -> [FakeCamera.Frame] {
        (0..<count).map { .init(sequence: UInt32($0), timestampNs: 1_000 * ms + Int64($0) * 33 * ms, fill: UInt8($0)) }
    }

    /// The calls after the first one of `call` in a trace.
    static func calls(after call: V4L2Call, in trace: [V4L2TraceEntry]) -> [V4L2Call] {
        guard let i = trace.firstIndex(where: { $0.call == call }) else { return [] }
        return trace[(i + 1)...].map(\.call)
    }

    // MARK: EBUSY

    /// A node another process holds exclusively: discovery leaves it out, opening it says it is in use.
    @Test func ebusyAtOpenIsDeviceInUse() throws {
        let fake = FakeCamera()
        fake.inject(.open, .busy, .always)
        let driver = V4L2Driver(system: fake)
        #expect(try driver.discoverDevices().isEmpty)
        #expect(throws: CaptureError.deviceInUse(Self.id)) { try driver.openDevice(uniqueID: Self.id) }
        // Nothing was asked of a descriptor that was never opened.
        #expect(fake.trace.allSatisfy { $0.call == .open && $0.error == .busy })
        #expect(fake.openDescriptors == 0)
    }

    /// REQBUFS says EBUSY when another file handle owns the queue (another process streams).
    @Test func ebusyOnRequestBuffersIsDeviceInUseAndMapsNothing() throws {
        let fake = FakeCamera(frames: Self.frames(2))
        let device = try V4L2Driver(system: fake).openDevice(uniqueID: Self.id)
        let stream = try Self.stream(device)
        fake.clearTrace()
        fake.inject(.requestBuffers, .busy)
        #expect(throws: CaptureError.deviceInUse(Self.id)) { try stream.start(at: .zero) }
        let after = Self.calls(after: .requestBuffers, in: fake.trace)
        #expect(!after.contains(.queryBuffer) && !after.contains(.mmap) && !after.contains(.streamOn))
        // Nothing to undo but the claim: the device starts once the other process lets go.
        let again = try Self.stream(device)
        try again.start(at: .zero)
        #expect(try again.nextSample()?.sequenceNumber == 0)
        again.stop()
    }

    /// STREAMON says EBUSY: in use; the buffers mapped for the start are unmapped and freed, once.
    @Test func ebusyOnStreamOnIsDeviceInUseAndUndoesTheStart() throws {
        let fake = FakeCamera(frames: Self.frames(2))
        let device = try V4L2Driver(system: fake).openDevice(uniqueID: Self.id)
        let stream = try Self.stream(device)
        fake.clearTrace()
        fake.inject(.streamOn, .busy)
        #expect(throws: CaptureError.deviceInUse(Self.id)) { try stream.start(at: .zero) }
        #expect(fake.count(.mmap) == 4)
        #expect(fake.count(.munmap) == 4)
        let after = Self.calls(after: .streamOn, in: fake.trace)
        #expect(after == [.munmap, .munmap, .munmap, .munmap, .requestBuffers])   // REQBUFS(0) frees them
        #expect(fake.trace.last?.detail == "count 0")
        #expect(!after.contains(.streamOff) && !after.contains(.dequeueBuffer), "a stream that never started is not stopped")
        stream.stop()
        #expect(fake.count(.munmap) == 4, "stopping a failed stream unmaps nothing twice")
    }

    // MARK: EINVAL

    /// S_FMT refused with EINVAL (the second time: the first stream starts): a format error, and
    /// the driver never requests buffers or turns the stream on.
    @Test func einvalOnSetFormatIsAFormatErrorAndNothingStreams() throws {
        let fake = FakeCamera(frames: Self.frames(1))
        let device = try V4L2Driver(system: fake).openDevice(uniqueID: Self.id)
        fake.inject(.setFormat, .invalidArgument, .nth(2))
        let first = try Self.stream(device)
        try first.start(at: .zero)
        first.stop()
        fake.clearTrace()
        let second = try Self.stream(device)
        let error = #expect(throws: CaptureError.self) { try second.start(at: .zero) }
        guard case .formatNotSupported(let what)? = error else {
            Issue.record("expected formatNotSupported, got \(String(describing: error))")
            return
        }
        #expect(what.contains("VIDIOC_S_FMT") && what.contains("Invalid argument"))
        #expect(fake.trace.map(\.call) == [.setFormat])
        #expect(fake.trace.first?.error == .invalidArgument)
        // The device is free again: the next stream sets the format and streams.
        let third = try Self.stream(device)
        try third.start(at: .zero)
        third.stop()
        #expect(fake.count(.streamOn) == 1)
    }

    // MARK: DQBUF

    /// DQBUF fails with ENODEV from now on: an unplug. The device is marked gone (its controls say
    /// so) and the failed buffer is never queued again.
    @Test func enodevOnDequeueFromNowOnIsAnUnplug() throws {
        let fake = FakeCamera(frames: Self.frames(3))
        let driver = V4L2Driver(system: fake)
        let device = try driver.openDevice(uniqueID: Self.id)
        let stream = try Self.stream(device)
        try stream.start(at: .zero)
        #expect(try stream.nextSample()?.sequenceNumber == 0)
        fake.inject(.dequeueBuffer, .noDevice, .always)
        fake.clearTrace()
        #expect(throws: CaptureError.deviceDisconnected(Self.id)) { try stream.nextSample() }
        #expect(throws: CaptureError.deviceDisconnected(Self.id)) { try stream.nextSample() }
        #expect(driver.events.hasDisconnected(deviceID: Self.id))
        #expect(!fake.trace.contains { $0.call == .queueBuffer })
        #expect(throws: CaptureError.deviceDisconnected(Self.id)) { try device.setValue(.integer(1), for: .brightness) }
        stream.stop()
        #expect(fake.count(.munmap) == 4)
    }

    /// EIO on DQBUF: a streaming failure while the node is there, an unplug once it has vanished.
    @Test func eioOnDequeueIsAStreamingFailureOrAnUnplug() throws {
        let fake = FakeCamera(frames: Self.frames(4))
        let driver = V4L2Driver(system: fake)
        let device = try driver.openDevice(uniqueID: Self.id)
        let stream = try Self.stream(device)
        try stream.start(at: .zero)
        fake.inject(.dequeueBuffer, .ioError)
        #expect(throws: CaptureError.deviceStartFailed(device: Self.id, reason: "streaming failed: VIDIOC_DQBUF: Input/output error")) {
            try stream.nextSample()
        }
        #expect(!driver.events.hasDisconnected(deviceID: Self.id))
        // The stream goes on after a transient error.
        #expect(try stream.nextSample()?.sequenceNumber == 0)
        fake.inject(.dequeueBuffer, .ioError)
        fake.disconnect()
        #expect(throws: CaptureError.deviceDisconnected(Self.id)) { try stream.nextSample() }
        #expect(driver.events.hasDisconnected(deviceID: Self.id))
        stream.stop()
    }

    // MARK: In a session

    /// ENODEV mid-stream under a recording: the session reports `deviceDisconnected`, the movie
    /// finishes exactly once with a playable file, and the backend unmaps every buffer once and
    /// closes the descriptor once.
    @Test(.timeLimit(.minutes(4))) func unplugMidRecordingFinishesTheMovieOnceAndReleasesTheNode() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("v4l2-unplug-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/unplugged.mov"
        let fake = FakeCamera.live(fps: 30)
        let delegate = FinishCounter()
        let errors = Locked<[CaptureError]>([])
        do {
            let registry = DeviceRegistry(drivers: [V4L2Driver(system: fake)])
            let session = CaptureSession(pace: .realtime)
            try session.setSessionPreset(.inputPriority)
            let camera = try registry.device(uniqueID: Self.id)
            try session.addInput(CaptureDeviceInput(device: camera))
            let movie = MovieFileOutput()
            var settings = MovieFileOutput.Settings()
            settings.preset = .ultrafast
            movie.settings = settings
            try session.addOutput(movie)
            let events = session.eventStream()
            try session.startRunning()
            movie.startRecording(to: path, recordingDelegate: delegate)
            await waitUntil(timeout: .seconds(150)) { movie.recordedDuration.seconds >= 0.3 }
            fake.disconnect()
            await waitUntil(timeout: .seconds(150)) { !delegate.finishes.withLock { $0.isEmpty } }
            let reported = await Self.runtimeErrors(in: events)
            errors.withLock { $0 = reported }
            // Stopping again must not finish the recording a second time.
            session.stopRunning()
            movie.stopRecording()
            #expect(errors.withLock { $0 } == [.deviceDisconnected(Self.id)])
            #expect(registry.driverEvents.hasDisconnected(deviceID: Self.id))
            #expect(!camera.isConnected)
        }
        let finishes = delegate.finishes.withLock { $0 }
        #expect(finishes.count == 1, "didFinishRecording fired \(finishes.count) times")
        let summary = try #require(finishes.first?.summary)
        #expect(summary.fileIsUsable)
        var decoded = 0
        try MediaFileReader(path: path).decode(video: { _ in decoded += 1 }, audio: nil)
        #expect(decoded >= 5 && decoded == summary.videoFrames, "decoded \(decoded) of \(summary.videoFrames) frames")

        // The streaming descriptor: unmapped every buffer once, closed once (when the last owner let go).
        let streamingFD = try #require(fake.trace.first { $0.call == .streamOn }?.fd)
        await waitUntil(timeout: .seconds(60)) { fake.trace.contains { $0.call == .close && $0.fd == streamingFD } }
        let trace = fake.trace
        #expect(trace.filter { $0.call == .close && $0.fd == streamingFD }.count == 1)
        #expect(trace.filter { $0.call == .mmap && $0.error == nil }.count == 4)
        #expect(trace.filter { $0.call == .munmap }.count == 4)
        let unplugged = try #require(trace.firstIndex { $0.call == .dequeueBuffer && $0.error == .noDevice })
        #expect(!trace[unplugged...].contains { $0.call == .streamOn }, "nothing restarted the gone device")
        #expect(fake.openDescriptors == 0)
    }

    /// EIO on DQBUF in a session with the node still there: the session reports the streaming
    /// failure and stops; the device stays connected and streams again on the next start.
    @Test(.timeLimit(.minutes(4))) func eioOnDequeueStopsTheSessionAndTheDeviceStaysUsable() async throws {
        let fake = FakeCamera.live(fps: 30)
        let registry = DeviceRegistry(drivers: [V4L2Driver(system: fake)])
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        let camera = try registry.device(uniqueID: Self.id)
        try session.addInput(CaptureDeviceInput(device: camera))
        let output = FrameCounter()
        try session.addOutput(output)
        let errors = Locked<[CaptureError]>([])
        let events = session.eventStream()
        try session.startRunning()
        await waitUntil(timeout: .seconds(150)) { output.count.withLock { $0 } >= 3 }
        fake.inject(.dequeueBuffer, .ioError)
        let reported = await Self.runtimeErrors(in: events)
        errors.withLock { $0 = reported }
        session.stopRunning()
        #expect(errors.withLock { $0 } == [.deviceStartFailed(device: Self.id, reason: "streaming failed: VIDIOC_DQBUF: Input/output error")])
        #expect(camera.isConnected)
        #expect(!registry.driverEvents.hasDisconnected(deviceID: Self.id))
        let failed = try #require(fake.trace.lastIndex { $0.call == .dequeueBuffer && $0.error == .ioError })
        let after = fake.trace[failed...].map(\.call)
        #expect(after.contains(.streamOff) && after.filter { $0 == .munmap }.count == 4)
        // A new run streams from the same device.
        let before = output.count.withLock { $0 }
        try session.startRunning()
        await waitUntil(timeout: .seconds(150)) { output.count.withLock { $0 } >= before + 2 }
        session.stopRunning()
        #expect(output.count.withLock { $0 } >= before + 2)
    }

    // MARK: Events per registry

    /// Each registry hears its own drivers' events, and no other registry's; observers hear them
    /// on the posting thread, before `nextSample` returns the frame after the gap.
    @Test func driverEventsBelongToTheirRegistry() throws {
        let gap = [FakeCamera.Frame(sequence: 0, timestampNs: 1_000 * Self.ms, fill: 1),
                   FakeCamera.Frame(sequence: 3, timestampNs: 1_100 * Self.ms, fill: 2)]
        let mine = DeviceRegistry(drivers: [V4L2Driver(system: FakeCamera(frames: gap))])
        let other = DeviceRegistry(drivers: [V4L2Driver(system: FakeCamera(frames: gap))])
        let heard = Locked<[DriverEvent]>([])
        let token = mine.driverEvents.addObserver { event in heard.withLock { $0.append(event) } }
        defer { mine.driverEvents.removeObserver(token) }
        let stream = try Self.stream(try mine.device(uniqueID: Self.id).driverDevice())
        try stream.start(at: .zero)
        _ = try stream.nextSample()
        let after = try #require(try stream.nextSample())
        stream.stop()
        #expect(heard.withLock { $0 } == [.samplesDropped(deviceID: Self.id, reason: .discontinuity, count: 2,
                                                         presentationTime: after.presentationTime)])
        #expect(mine.driverEvents.droppedCount(deviceID: Self.id) == 2)
        #expect(other.driverEvents.droppedCount(deviceID: Self.id) == 0)
    }
}

extension V4L2ErrorPathTests {
    /// The runtime errors a session reported up to its `stopped` event, read in the test's own
    /// task: a watcher `Task` can be starved for minutes when the whole suite shares two cores.
    static func runtimeErrors(in events: AsyncStream<SessionEvent>) async -> [CaptureError] {
        var errors: [CaptureError] = []
        for await event in events {
            switch event {
            case .runtimeError(let error): errors.append(error)
            case .stopped: return errors
            default: continue
            }
        }
        return errors
    }
}

/// Counts `didFinishRecording` calls with their summaries and errors.
private final class FinishCounter: CaptureFileOutputRecordingDelegate {
    let finishes = Locked<[(summary: RecordingSummary, error: CaptureError?)]>([])
    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        finishes.withLock { $0.append((summary, error)) }
    }
}

/// Counts delivered video frames.
private final class FrameCounter: CaptureOutput {
    let attachment = OutputAttachment()
    let count = Locked(0)
    func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }
    var demand: OutputDemand { .ready }
    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) { count.withLock { $0 += 1 } }
    func sessionDidStop() {}
}
