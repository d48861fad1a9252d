import CaptureKitTesting
@_spi(Testing) import CaptureKit
import CaptureCore
import Foundation
import Testing

/// Real-time pace is a mode, not the default in tests: one short check that it paces like a
/// device and still produces a clean, marker-correct file.
@Suite struct RealtimePaceTests {
    @Test func realtimeRecordingIsPacedAndClean() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let output = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        output.settings = settings
        output.maxRecordedDuration = MediaTime(value: 3, timescale: 2)
        try session.addOutput(output)
        let path = try TestSupport.temporaryDirectory() + "/realtime.mp4"
        let started = ContinuousClock.now
        try session.startRunning()
        let summary = try await output.record(to: path)
        session.stopRunning()
        let elapsed = ContinuousClock.now - started
        // A lower bound only: pacing means 1.5 s of media cannot take less than about 1.5 s.
        #expect(elapsed >= .milliseconds(1400), "1.5 s recorded in \(elapsed)")
        #expect(summary.videoFrames == 45)
        let report = try TestSupport.analyze(path)
        #expect(report.isClean)
        #expect(report.syncMarkers.map(\.second) == [1])
        // Audio that arrived before the first frame is kept and cut at its PTS, so sync holds in real time too.
        for marker in report.syncMarkers {
            let offset = try #require(marker.offset)
            #expect(abs(offset) <= 1.0 / 30, "A/V offset \(offset) s")
        }
    }

    /// Real-time pumps ask the kernel for a 0.1 ms slice (they wake for each frame and must hand it
    /// on before x264's threads take the cores back); a virtual-pace pump keeps the default. Read
    /// back from the kernel on the thread that delivers each frame (an output's `receive` runs on
    /// the pump): /proc/thread-self/sched's `se.slice` (Linux ≥ 6.12). Only this session's pump is
    /// looked at: other real-time tests run beside this one.
    @Test(.enabled(if: RealtimePaceTests.kernelReportsSlices, "this kernel reports no per-thread slice (se.slice: Linux ≥ 6.12)"))
    func realtimePumpThreadsRunWithAShortSlice() async throws {
        for pace in [CapturePace.virtual, .realtime] {
            let slices = Locked<[String]>([])
            let collector = FrameCollector(limit: 3) { _, _ in slices.withLock { $0.append(Self.currentThreadSlice() ?? "none") } }
            let registry = CaptureKit.makeRegistry()
            let session = CaptureSession(pace: pace)
            try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
            try session.addOutput(collector)
            try session.startRunning()
            await waitUntil(timeout: .seconds(30)) { collector.frames.count >= 3 }
            session.stopRunning()
            let seen = slices.withLock { $0 }
            #expect(seen.count == 3, "\(pace): \(seen.count) frames")
            if pace == .realtime {
                #expect(seen.allSatisfy { $0 == "100000" }, "real time: slices \(seen)")
            } else {
                #expect(!seen.contains("100000") && !seen.contains("none"), "virtual: slices \(seen)")
            }
        }
    }

    /// The calling thread's slice in ns, as the kernel reports it.
    static func currentThreadSlice() -> String? {
        guard let sched = try? String(contentsOfFile: "/proc/thread-self/sched", encoding: .utf8) else { return nil }
        let line = sched.split(separator: "\n").first { $0.hasPrefix("se.slice") }
        return line?.split(separator: ":").last?.trimmingCharacters(in: .whitespaces)
    }

    static var kernelReportsSlices: Bool {
        (try? String(contentsOfFile: "/proc/self/sched", encoding: .utf8))?.contains("se.slice") ?? false
    }

    /// A slow encoder must cost the movie output memory (its writer queue), never the device's
    /// pace: the intervals between deliveries on the camera's pump thread stay at the frame period
    /// (100 ms at 10 fps) while every frame takes twice that to encode. (While the encoder ran
    /// inside the lock the device thread's `receive` takes, every interval was the encode time.)
    /// A second camera that feeds no movie is the control: its pump renders the same kind of frames
    /// on the same loaded machine, so the comparison holds while other tests run in parallel.
    @Test func slowEncoderDoesNotSlowTheDevicePump() async throws {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.vga640x480)
        // 10 fps leaves both pumps room to keep pace while other tests load the machine.
        for id in ["sim:back", "sim:front"] {
            let device = try registry.device(uniqueID: id)
            try device.lockForConfiguration()
            try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 10))
            try device.setActiveVideoMaxFrameDuration(MediaTime(value: 1, timescale: 10))
            device.unlockForConfiguration()
            try session.addInput(CaptureDeviceInput(device: device))
        }
        let output = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        output.settings = settings
        output.testingEncodeDelay = .milliseconds(200)
        let clock = DeliveryClock(counting: "sim:back")
        try session.addOutput(output)
        try session.addOutput(clock)
        for connection in output.attachment.connections where connection.input.device.uniqueID == "sim:front" {
            connection.isEnabled = false
        }
        let path = try TestSupport.temporaryDirectory() + "/slow-encoder.mp4"
        try session.startRunning()
        defer { session.stopRunning() }
        let finished = RecordingFinished()
        let frames = 20
        // The pump thread itself stops the recording after `frames` deliveries, so the writer's
        // backlog (and the test's time) stays the same however late this task gets to run.
        clock.arm(frames: frames) { output.stopRecording() }
        output.startRecording(to: path, recordingDelegate: finished)
        let summary = try #require(await finished.summary(timeout: .seconds(60)))
        let pump = clock.intervals("sim:back"), control = clock.intervals("sim:front")
        print("slow encoder (200 ms/frame, 100 ms period): recording camera's pump intervals \(pump); control camera's \(control); encoder queue high-water \(output.encoderQueueDepth.highWater)")
        #expect(pump.count == frames - 1)
        #expect(pump.median < 125, "the pump's median delivery interval is \(pump.median) ms for a 100 ms frame period")
        // A loaded machine delays both pumps alike: the tail may exceed the period only about as much
        // as the control's does. Before the fix every interval was the encode time (≈ 205 ms against
        // the control's ≈ 102 ms). One long interval alone is not that: CI once saw a single 223.6 ms
        // among eighteen of ≈ 100 ms (the control's longest 111.5 ms), which 7 local runs, 3 of them
        // beside three busy loops, never showed. So the second-longest is compared: an encoder that
        // held the pump on two frames of nineteen still fails.
        #expect(pump.secondLongest < max(150, control.secondLongest + 75),
                "second-longest interval \(pump.secondLongest) ms vs the control camera's \(control.secondLongest) ms")
        #expect(output.encoderQueueDepth.highWater > 2, "the encoder was slow enough to queue frames")
        #expect(summary.videoFrames >= frames - 1, "queued frames are written, not dropped (\(summary.videoFrames))")
    }
}

/// Sorted intervals in milliseconds.
struct Intervals: CustomStringConvertible {
    let sorted: [Double]
    /// In delivery order, to show where a long one fell.
    let inOrder: [Double]
    init(_ times: [MediaTime]) {
        inOrder = zip(times.dropFirst(), times).map { ($0 - $1).seconds * 1000 }
        sorted = inOrder.sorted()
    }
    var count: Int { sorted.count }
    var median: Double { sorted.isEmpty ? 0 : sorted[sorted.count / 2] }
    var p95: Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 95 / 100)] }
    var max: Double { sorted.last ?? 0 }
    var secondLongest: Double { sorted.dropLast().last ?? 0 }
    var description: String {
        String(format: "n %d, median %.1f ms, p95 %.1f ms, max %.1f ms", count, median, p95, max)
            + " [" + inOrder.map { String(format: "%.0f", $0) }.joined(separator: " ") + "]"
    }
}

/// Notes the host time at which each pump thread delivers a video frame, while armed: from
/// `arm` until `frames` frames of the counted device, after which it runs `then` on that pump thread.
final class DeliveryClock: CaptureOutput {
    let attachment = OutputAttachment()
    private let counted: String
    private let state = Locked<(remaining: Int, times: [String: [MediaTime]], then: (@Sendable () -> Void)?)>((0, [:], nil))
    init(counting deviceID: String) { counted = deviceID }
    func accepts(_ mediaType: MediaType) -> Bool { mediaType == .video }
    var demand: OutputDemand { .idle }
    func arm(frames: Int, then: @escaping @Sendable () -> Void) {
        state.withLock { $0 = (frames, [:], then) }
    }
    func intervals(_ deviceID: String) -> Intervals { Intervals(state.withLock { $0.times[deviceID] ?? [] }) }
    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        let now = HostClock.now()
        let device = connection.input.device.uniqueID
        let then = state.withLock { s -> (@Sendable () -> Void)? in
            guard s.remaining > 0 else { return nil }
            s.times[device, default: []].append(now)
            guard device == counted else { return nil }
            s.remaining -= 1
            guard s.remaining == 0 else { return nil }
            defer { s.then = nil }
            return s.then
        }
        then?()
    }
    func sessionDidStop() {}
}

/// Records, for each callback, the thread's slice, whether it ran on the delegate's queue, and the PTS.
final class QueueProbe: VideoDataOutputSampleBufferDelegate {
    struct Call: Sendable { var slice: String?; var onQueue: Bool; var pts: MediaTime }
    let key: DispatchSpecificKey<Int>
    let calls = Locked<[Call]>([])
    init(key: DispatchSpecificKey<Int>) { self.key = key }
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        let call = Call(slice: RealtimePaceTests.currentThreadSlice(), onQueue: DispatchQueue.getSpecific(key: key) == 7,
                        pts: sample.presentationTime)
        calls.withLock { $0.append(call) }
    }
}

/// In `RealtimePaceTests` so that CI runs them in its real-time pass, away from the CPU-bound suites.
extension RealtimePaceTests {
    /// Issue 17, latency (a): in real time a video data output enters the delegate's queue from its
    /// own delivery thread, which has the pumps' short slice, so the callback does not wait for one
    /// of libdispatch's threads to win a core from x264. The callbacks still run on the queue, in
    /// order; in virtual pace they are queued with `async` as before (no short slice).
    @Test(.enabled(if: RealtimePaceTests.kernelReportsSlices, "this kernel reports no per-thread slice (se.slice: Linux ≥ 6.12)"))
    func realtimeCallbacksRunOnTheQueueFromAShortSliceThread() async throws {
        for pace in [CapturePace.virtual, .realtime] {
            let key = DispatchSpecificKey<Int>()
            let queue = DispatchQueue(label: "RealtimePaceTests.delegate.\(pace)")
            queue.setSpecific(key: key, value: 7)
            let probe = QueueProbe(key: key)
            let registry = CaptureKit.makeRegistry()
            let session = CaptureSession(pace: pace)
            try session.setSessionPreset(.vga640x480)
            try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
            let output = VideoDataOutput()
            output.setSampleBufferDelegate(probe, queue: queue)
            try session.addOutput(output)
            try session.startRunning()
            await waitUntil(timeout: .seconds(30)) { probe.calls.withLock { $0.count } >= 6 }
            session.stopRunning()
            let calls = probe.calls.withLock { $0 }
            #expect(calls.count >= 6, "\(pace): \(calls.count) callbacks")
            #expect(calls.allSatisfy { $0.onQueue }, "\(pace): a callback ran off the delegate's queue")
            #expect(zip(calls, calls.dropFirst()).allSatisfy { $0.pts < $1.pts }, "\(pace): callbacks out of order")
            let slices = calls.map { $0.slice ?? "none" }
            if pace == .realtime {
                #expect(slices.allSatisfy { $0 == "100000" }, "real time: slices \(slices)")
            } else {
                #expect(!slices.contains("100000"), "virtual: slices \(slices)")
            }
        }
    }

    /// The delivery thread runs jobs in the order given, ends after a second without work (an output
    /// never keeps an idle thread), and starts again with the next job.
    @Test func deliveryThreadKeepsOrderEndsWhenIdleAndRestarts() async throws {
        let thread = DeliveryThread(name: "RealtimePaceTests.delivery")
        let seen = Locked<[Int]>([])
        for i in 0..<200 { thread.enqueue { seen.withLock { $0.append(i) } } }
        await waitUntil(timeout: .seconds(10)) { seen.withLock { $0.count } >= 200 }
        #expect(seen.withLock { $0 } == Array(0..<200))
        await waitUntil(timeout: .seconds(10)) { !thread.isRunning }
        #expect(!thread.isRunning, "still running after 10 s without work")
        thread.enqueue { seen.withLock { $0.append(200) } }
        await waitUntil(timeout: .seconds(10)) { seen.withLock { $0.count } >= 201 }
        #expect(seen.withLock { $0.last } == 200)
    }
}

extension RealtimePaceTests {
    /// The short slice stays with the thread that asked for it: the kernel copies a custom slice into
    /// every thread started from it, and libdispatch starts its workers from whichever thread queues
    /// work, so without SCHED_FLAG_RESET_ON_FORK a pump's `async` made short-slice dispatch workers
    /// (and x264's threads inherited it from the writer's worker) — seen as virtual-pace callbacks
    /// running on threads with a 0.1 ms slice while real-time sessions ran beside them.
    @Test(.enabled(if: RealtimePaceTests.kernelReportsSlices, "this kernel reports no per-thread slice (se.slice: Linux ≥ 6.12)"))
    func threadsStartedFromAShortSliceThreadGetTheDefaultSlice() async throws {
        let seen = Locked<(parent: String?, child: String?)>((nil, nil))
        let done = DispatchSemaphore(value: 0)
        let parent = Thread {
            LatencySensitiveThread.requestShortSlice()
            let parentSlice = RealtimePaceTests.currentThreadSlice()
            let child = Thread {
                seen.withLock { $0 = (parentSlice, RealtimePaceTests.currentThreadSlice()) }
                done.signal()
            }
            child.start()
        }
        parent.start()
        #expect(done.wait(timeout: .now() + 10) == .success)
        let slices = seen.withLock { $0 }
        #expect(slices.parent == "100000")
        #expect(slices.child != nil && slices.child != "100000", "child thread slice \(slices.child ?? "none")")
    }
}
