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
            let deadline = ContinuousClock.now + .seconds(30)
            while collector.frames.count < 3, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
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
        // as the control's does (with 19 intervals p95 is the longest one; before the fix it was the
        // encode time, ≈ 205 ms, against the control's ≈ 102 ms).
        #expect(pump.p95 < max(150, control.p95 + 75), "p95 \(pump.p95) ms vs the control camera's \(control.p95) ms")
        #expect(output.encoderQueueDepth.highWater > 2, "the encoder was slow enough to queue frames")
        #expect(summary.videoFrames >= frames - 1, "queued frames are written, not dropped (\(summary.videoFrames))")
    }
}

/// Sorted intervals in milliseconds.
struct Intervals: CustomStringConvertible {
    let sorted: [Double]
    init(_ times: [MediaTime]) { sorted = zip(times.dropFirst(), times).map { ($0 - $1).seconds * 1000 }.sorted() }
    var count: Int { sorted.count }
    var median: Double { sorted.isEmpty ? 0 : sorted[sorted.count / 2] }
    var p95: Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 95 / 100)] }
    var max: Double { sorted.last ?? 0 }
    var description: String {
        String(format: "n %d, median %.1f ms, p95 %.1f ms, max %.1f ms", count, median, p95, max)
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
