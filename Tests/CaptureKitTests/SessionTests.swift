import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Counts frames per output so tests can see what flows where.
private final class FrameCounter: VideoDataOutputSampleBufferDelegate {
    let count = Locked(0)
    let sizes = Locked<Set<Int>>([])
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        count.withLock { $0 += 1 }
        if let p = sample.pixelBuffer { sizes.withLock { _ = $0.insert(p.width) } }
    }
}

/// Counts audio buffers: a running microphone is the virtual clock's witness.
private final class AudioCounter: AudioDataOutputSampleBufferDelegate {
    let count = Locked(0)
    func dataOutput(_ output: AudioDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        count.withLock { $0 += 1 }
    }
}


@Suite struct SessionTests {
    // Each test gets its own simulator, so device state never leaks between parallel tests.
    let registry = CaptureKit.makeRegistry()

    @Test func presetsPickFormatsAndAManualFormatMeansInputPriority() throws {
        let session = CaptureSession()
        let device = try registry.device(uniqueID: "sim:back")
        #expect(session.sessionPreset == .high)
        try session.addInput(CaptureDeviceInput(device: device))
        // high: the largest format up to 1080p30.
        #expect(device.activeFormat.dimensions == Dimensions(width: 1920, height: 1080))
        #expect(session.canSetSessionPreset(.hd1280x720))
        // sim:back has a 3840x2160 format (issue 17's 4K30 row); it has no 960x540 one.
        #expect(session.canSetSessionPreset(.hd4K3840x2160))
        #expect(!session.canSetSessionPreset(.iFrame960x540))
        #expect(throws: CaptureError.self) { try session.setSessionPreset(.iFrame960x540) }
        try session.setSessionPreset(.hd4K3840x2160)
        #expect(device.activeFormat.dimensions == Dimensions(width: 3840, height: 2160))
        try session.setSessionPreset(.hd1280x720)
        #expect(device.activeFormat.dimensions == Dimensions(width: 1280, height: 720))
        try session.setSessionPreset(.low)
        #expect(device.activeFormat.dimensions == Dimensions(width: 640, height: 480))
        #expect(session.sessionPreset == .low)
        // The app picks a format itself: the session switches to input priority.
        let hd = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 30))
        try device.lockForConfiguration()
        try device.setActiveFormat(hd)
        device.unlockForConfiguration()
        #expect(session.sessionPreset == .inputPriority)
        #expect(SessionPreset.allCases.count == 12)
    }

    @Test func configurationAppliesOnlyAtTheOutermostCommit() throws {
        let session = CaptureSession()
        let device = try registry.device(uniqueID: "sim:back")
        let output = VideoDataOutput()
        session.beginConfiguration()
        session.beginConfiguration()
        try session.addInput(CaptureDeviceInput(device: device))
        try session.addOutput(output)
        try session.setSessionPreset(.vga640x480)
        #expect(output.attachment.connections.isEmpty)
        #expect(throws: CaptureError.self) { try session.startRunning() }
        session.commitConfiguration()
        #expect(output.attachment.connections.isEmpty, "still inside the outer block")
        session.commitConfiguration()
        #expect(output.attachment.connections.count == 1)
        #expect(device.activeFormat.dimensions == Dimensions(width: 640, height: 480))
        try session.startRunning()
        session.stopRunning()
    }

    @Test func inputsAndOutputsCanChangeWhileRunning() async throws {
        let session = CaptureSession()
        try session.setSessionPreset(.vga640x480)
        let output = VideoDataOutput()
        let counter = FrameCounter()
        output.setSampleBufferDelegate(counter, queue: DispatchQueue(label: "count"))
        try session.addOutput(output)
        try session.startRunning()
        defer { session.stopRunning() }
        #expect(session.isRunning)
        let input = try CaptureDeviceInput(device: registry.device(uniqueID: "sim:back"))
        #expect(session.canAddInput(input))
        try session.addInput(input)
        try await eventually("counter.count.withLock { $0 } >= 10", timeout: .seconds(30)) { counter.count.withLock { $0 } >= 10 }
        #expect(counter.count.withLock { $0 } >= 10)
        // A microphone keeps virtual time moving; samples are merged in PTS order, so once its
        // buffers have advanced past several frame periods, a still-running camera would have
        // delivered frames.
        let microphone = AudioDataOutput()
        let heard = AudioCounter()
        microphone.setSampleBufferDelegate(heard, queue: DispatchQueue(label: "heard"))
        try session.addOutput(microphone)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        session.removeInput(input)
        let after = output.deliveredFrameCount
        let buffersAtRemoval = heard.count.withLock { $0 }
        // 20 buffers of 1024 samples at 48 kHz ≈ 0.43 s ≈ 13 frame periods.
        #expect(await waitFor(timeout: .seconds(30)) { heard.count.withLock { $0 } >= buffersAtRemoval + 20 })
        #expect(output.deliveredFrameCount <= after + 1, "no frames once the input is gone")
        let late = VideoDataOutput()
        #expect(session.canAddOutput(late))
        try session.addOutput(late)
        #expect(!session.canAddOutput(late))
    }

    @Test func disabledConnectionsDeliverNothing() async throws {
        let session = CaptureSession()
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let a = VideoDataOutput(), b = VideoDataOutput()
        let countA = FrameCounter(), countB = FrameCounter()
        a.setSampleBufferDelegate(countA, queue: DispatchQueue(label: "a"))
        b.setSampleBufferDelegate(countB, queue: DispatchQueue(label: "b"))
        try session.addOutput(a)
        try session.addOutput(b)
        let connection = try #require(b.attachment.connections.first)
        connection.isEnabled = false
        #expect(!connection.isActive)
        try session.startRunning()
        try await eventually("countA.count.withLock { $0 } >= 20", timeout: .seconds(30)) { countA.count.withLock { $0 } >= 20 }
        session.stopRunning()
        #expect(countA.count.withLock { $0 } >= 20)
        #expect(countB.count.withLock { $0 } == 0)
    }

    @Test func eventsInterruptionAndAutomaticResume() async throws {
        let session = CaptureSession()
        try session.setSessionPreset(.vga640x480)
        let device = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: device))
        let output = VideoDataOutput()
        let counter = FrameCounter()
        output.setSampleBufferDelegate(counter, queue: DispatchQueue(label: "count"))
        try session.addOutput(output)
        let events = session.eventStream()
        let seen = Locked<[String]>([])
        let listener = Task {
            for await event in events {
                let name: String
                switch event {
                case .started: name = "started"
                case .stopped: name = "stopped"
                case .interrupted(let reason): name = "interrupted(\(reason.rawValue))"
                case .interruptionEnded: name = "interruptionEnded"
                case .runtimeError: name = "runtimeError"
                case .streamEnded: name = "streamEnded"
                }
                seen.withLock { $0.append(name) }
            }
        }
        try session.startRunning()
        try await eventually("counter.count.withLock { $0 } >= 5", timeout: .seconds(30)) { counter.count.withLock { $0 } >= 5 }
        let availability = DeviceAvailability.shared
        availability.markUnavailable(device, reason: .videoDeviceNotAvailableDueToSystemPressure)
        #expect(session.isInterrupted && !session.isRunning)
        // Delivery has ended when the interruption is reported: wait for the event, then the
        // count must not have moved since markUnavailable returned.
        let during = output.deliveredFrameCount
        #expect(await waitFor(timeout: .seconds(30)) { seen.withLock { $0.contains { $0.hasPrefix("interrupted") } } })
        #expect(output.deliveredFrameCount == during, "frames delivered during the interruption")
        availability.markAvailable(device)
        #expect(session.isRunning)
        try await eventually("counter.count.withLock { $0 } >= during + 10", timeout: .seconds(30)) { counter.count.withLock { $0 } >= during + 10 }
        session.stopRunning()
        try await eventually("seen.withLock { $0.count } >= 4", timeout: .seconds(30)) { seen.withLock { $0.count } >= 4 }
        listener.cancel()
        #expect(seen.withLock { $0 } == ["started", "interrupted(videoDeviceNotAvailableDueToSystemPressure)", "interruptionEnded", "stopped"])
        #expect(counter.count.withLock { $0 } >= during + 10)
    }

    @Test func oneDeviceFeedsOneRunningSessionButTwoCamerasRunAtOnce() async throws {
        let camera = try registry.device(uniqueID: "sim:back")
        let first = CaptureSession(), second = CaptureSession()
        try first.setSessionPreset(.vga640x480)
        try first.addInput(CaptureDeviceInput(device: camera))
        try second.addInput(CaptureDeviceInput(device: camera))
        try first.startRunning()
        #expect(throws: CaptureError.deviceInUse("sim:back")) { try second.startRunning() }
        #expect(!second.isRunning)
        first.stopRunning()
        try second.startRunning()
        second.stopRunning()

        // Two simulators' cameras (separate registries) record side by side.
        let other = try CaptureKit.makeRegistry(seed: 5).device(uniqueID: "sim:back")
        let a = CaptureSession(), b = CaptureSession()
        for (session, device) in [(a, camera), (b, other)] {
            try session.setSessionPreset(.vga640x480)
            try session.addInput(CaptureDeviceInput(device: device))
        }
        let outA = MovieFileOutput(), outB = MovieFileOutput()
        for (session, out) in [(a, outA), (b, outB)] {
            out.maxRecordedDuration = MediaTime(value: 1, timescale: 1)
            try session.addOutput(out)
            try session.startRunning()
        }
        let dir = try TestSupport.temporaryDirectory()
        async let ra = outA.record(to: dir + "/a.mp4")
        async let rb = outB.record(to: dir + "/b.mp4")
        let (sa, sb) = try await (ra, rb)
        a.stopRunning()
        b.stopRunning()
        #expect(sa.videoFrames == 30 && sb.videoFrames == 30)
    }

    @Test func stabilizationReportsWhatTheFormatSupports() throws {
        let session = CaptureSession()
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        let movie = MovieFileOutput()
        try session.addOutput(movie)
        let connection = try #require(movie.connection(with: .video))
        #expect(connection.preferredVideoStabilizationMode == .off)
        #expect(connection.activeVideoStabilizationMode == .off)
        connection.preferredVideoStabilizationMode = .auto
        let supported = connection.input.device.activeFormat.supportedStabilizationModes
        #expect(connection.activeVideoStabilizationMode != .auto)
        #expect(connection.isVideoStabilizationSupported == supported.contains { $0 != .off })
        if supported.contains(.cinematic) { #expect(connection.activeVideoStabilizationMode == .cinematic) }
        #expect(movie.connection(with: .audio) == nil)
        #expect(try #require(movie.connection(with: .video)).videoOrientation == .landscapeRight)
    }

    /// 1 000 start/stop cycles from four threads at once, while an output also stops the session
    /// from its own delivery thread every few frames: nothing crashes or hangs, and once the calls
    /// are done the session is what the last call asked for. After a final start it keeps running
    /// (a stop left over from an earlier run, which the pump-thread stops are, does not end it);
    /// after a final stop it has released the camera (another session can stream from it).
    @Test func concurrentStartStopCyclesEndInTheLastCallsState() async throws {
        let session = CaptureSession()
        try session.setSessionPreset(.vga640x480)
        let camera = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: camera))
        let output = VideoDataOutput()
        let counter = FrameCounter()
        output.setSampleBufferDelegate(counter, queue: DispatchQueue(label: "count"))
        let stopper = PumpThreadStopper(session, every: 1)
        try session.addOutput(output)
        try session.addOutput(stopper)
        let threads = 4, cycles = 250
        let started = Locked(0)
        let done = DispatchGroup()
        for _ in 0..<threads {
            done.enter()
            Thread {
                for _ in 0..<cycles {
                    if (try? session.startRunning()) != nil { started.withLock { $0 += 1 } }
                    // Sometimes long enough for a frame (and the stopper's stop) to come.
                    usleep(UInt32.random(in: 0...3000))
                    session.stopRunning()
                }
                done.leave()
            }.start()
        }
        let finished = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: done.wait(timeout: .now() + 120) == .success) }
        }
        try #require(finished, "\(threads * cycles) start/stop cycles did not finish within 120 s")
        print("concurrent start/stop: \(started.withLock { $0 }) of \(threads * cycles) starts succeeded; the stopper stopped \(stopper.stops) runs from a pump thread")
        #expect(started.withLock { $0 } > 0)
        stopper.disarm()

        try session.startRunning()
        #expect(session.isRunning)
        let before = counter.count.withLock { $0 }
        #expect(await waitFor(timeout: .seconds(30)) { counter.count.withLock { $0 } >= before + 30 }, "frames flow after the final start")
        #expect(session.isRunning, "a stop from an earlier run stopped the final one")

        session.stopRunning()
        #expect(!session.isRunning)
        let other = CaptureSession()
        try other.addInput(CaptureDeviceInput(device: camera))
        try other.startRunning()
        other.stopRunning()
    }
}

/// An output that calls `stopRunning()` on the session's delivery thread every `every` video frames
/// (outputs should not; the session then stops that run just after the call returns).
private final class PumpThreadStopper: CaptureOutput {
    let attachment = OutputAttachment()
    private let session: CaptureSession
    private let every: Int
    private let state = Locked((armed: true, frames: 0, stops: 0))
    init(_ session: CaptureSession, every: Int) {
        self.session = session
        self.every = every
    }
    var stops: Int { state.withLock { $0.stops } }
    func disarm() { state.withLock { $0.armed = false } }
    func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }
    var demand: OutputDemand { .idle }
    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let stop = state.withLock { s -> Bool in
            s.frames += 1
            guard s.armed, s.frames % every == 0 else { return false }
            s.stops += 1
            return true
        }
        if stop { session.stopRunning() }
    }
    func sessionDidStop() {}
}
