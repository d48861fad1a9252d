import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Collects what a video data output delivers: frame index, PTS and size.
final class DeliveryLog: VideoDataOutputSampleBufferDelegate {
    struct Entry: Sendable { var index: Int64; var pts: MediaTime; var width: Int; var height: Int }
    let entries = Locked<[Entry]>([])
    func dataOutput(_ output: VideoDataOutput, didOutput sample: SampleBuffer, from connection: CaptureConnection) {
        guard let pixels = sample.pixelBuffer else { return }
        entries.withLock { $0.append(Entry(index: sample.sequenceNumber, pts: sample.presentationTime, width: pixels.width, height: pixels.height)) }
    }
}

/// Live reconfiguration (issue 15): format, frame-duration and preset changes reach a running
/// session at the next frame boundary, without stopRunning.
@Suite struct LiveReconfigurationTests {
    /// Packet PTS of a file's video stream, in presentation order (ffprobe as the oracle).
    static func videoPacketTimes(_ path: String) throws -> [Double] {
        let result = try TestSupport.run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time",
                                                     "-of", "csv=p=0", path])
        #expect(result.status == 0, "ffprobe: \(result.stderr)")
        return result.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: ","))) }.sorted()
    }

    /// Frame-index stamps of every decoded frame, in order.
    static func decodedStamps(_ path: String) throws -> [(index: UInt32?, pts: Double, width: Int)] {
        var stamps: [(UInt32?, Double, Int)] = []
        try MediaFileReader(path: path).decode(video: { frame in
            let plane = LumaPlane(base: frame.luma, width: frame.width, height: frame.height, bytesPerRow: frame.bytesPerRow[0])
            stamps.append((FrameStampReader.frameIndex(in: plane), frame.presentationTime, frame.width))
        }, audio: nil)
        return stamps.map { (index: $0.0, pts: $0.1, width: $0.2) }
    }

    /// Seed 003: "配置一个具体设备格式… lockForConfiguration, setActiveFormat, activeVideoMin/MaxFrameDuration,
    /// unlockForConfiguration" — done here on a camera that is already running and recording.
    @Test func seed003SwitchesRunningBackCameraTo240fps() async throws {
        let registry = CaptureKit.makeRegistry(seed: 3)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        let device = try registry.device(uniqueID: "sim:back")
        // The 1280x720 5–240 fps format of the seed's table, running at 30 fps.
        let slowMotion = try #require(device.formats.first {
            $0.dimensions == Dimensions(width: 1280, height: 720) && $0.pixelFormat == .nv12 && !$0.isFullRange
                && $0.frameRateRanges.contains { $0.maxFrameRate == 240 && $0.minFrameRate == 5 }
        })
        try device.lockForConfiguration()
        try device.setActiveFormat(slowMotion)
        device.unlockForConfiguration()
        #expect(device.activeVideoMinFrameDuration == MediaTime(value: 1, timescale: 30))
        try session.addInput(CaptureDeviceInput(device: device))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        try session.addOutput(movie)
        let log = DeliveryLog()
        let data = VideoDataOutput()
        let queue = DispatchQueue(label: "delivery-log")
        data.alwaysDiscardsLateVideoFrames = false
        data.setSampleBufferDelegate(log, queue: queue)
        try session.addOutput(data)
        try session.enableManualStepping()
        try session.startRunning()
        defer { session.stopRunning() }
        let path = try TestSupport.temporaryDirectory() + "/seed003-240fps.mp4"
        let recording = Task { try await movie.record(to: path) }
        try await eventually("the movie to start recording") { movie.isRecording }
        // One second at 30 fps.
        try session.advance(toFrame: 30)
        let changeTime = Locked<MediaTime?>(nil)
        // Subscribed before the change (a subscription made later would miss it).
        let observations = device.observe(.activeFrameDuration)
        let observed = Task { () -> TimedControlValue? in
            for await value in observations { return value }
            return nil
        }
        // The seed's steps, while running:
        let desired = MediaTime(value: 1, timescale: 240)
        #expect(slowMotion.supports(frameDuration: desired))
        try device.lockForConfiguration()
        try device.setActiveFormat(slowMotion)
        try device.setActiveVideoMinFrameDuration(desired) { pts in changeTime.withLock { $0 = pts } }
        try device.setActiveVideoMaxFrameDuration(desired)
        device.unlockForConfiguration()
        #expect(session.isRunning)
        // One more second and a bit: at 240 fps after the change.
        try session.advance(toFrame: 30 + 2 + 240)
        movie.stopRecording()
        let summary = try await recording.value
        session.stopRunning()
        queue.sync {}
        let reported = try #require(await { () -> MediaTime? in
            await waitUntil(timeout: .seconds(30)) { changeTime.withLock { $0 } != nil }
            return changeTime.withLock { $0 }
        }())
        let observation = try #require(await observed.value)
        #expect(observation.presentationTime == reported)
        #expect(observation.value == .real(desired.seconds))

        // Delivery: 30 fps up to the reported PTS, 240 fps from it, the switch within two frame periods
        // of the boundary after the last frame delivered before the change (frame 29 ends at 1 s).
        let entries = log.entries.withLock { $0 }
        #expect(entries.map(\.index) == (0..<Int64(entries.count)).map { $0 }, "every frame delivered, in order")
        let before = entries.filter { $0.pts < reported }, after = entries.filter { $0.pts >= reported }
        #expect(before.count >= 30 && after.count >= 240)
        let boundary = MediaTime(value: 1, timescale: 1)
        #expect(reported >= boundary && reported - boundary <= MediaTime(value: 2, timescale: 30),
                "the change took effect at \(reported.seconds) s")
        for (a, b) in zip(before, before.dropFirst()) { #expect(b.pts - a.pts == MediaTime(value: 1, timescale: 30)) }
        for (a, b) in zip(after, after.dropFirst()) { #expect(b.pts - a.pts == desired) }
        #expect(after.allSatisfy { $0.width == 1280 && $0.height == 720 })

        // The recording kept every frame: stamps 0, 1, 2, … in order, none missing.
        #expect(summary.stopReason == "requested")
        let stamps = try Self.decodedStamps(path)
        #expect(stamps.count == summary.videoFrames)
        #expect(stamps.map(\.index) == (0..<UInt32(stamps.count)).map { Optional($0) })
        #expect(stamps.count >= 30 + 240)
        // ffprobe: the PTS spacing changes from 1/30 to 1/240 at the reported PTS (the file starts at frame 0, PTS 0).
        let times = try Self.videoPacketTimes(path)
        #expect(times.count == stamps.count)
        let origin = try #require(times.first)
        let switchAt = reported.seconds - (summary.startTime ?? 0)
        var slow = 0, fast = 0
        for (a, b) in zip(times, times.dropFirst()) {
            let gap = b - a
            if b - origin <= switchAt + 1e-4 {
                #expect(abs(gap - 1.0 / 30) < 2e-4, "gap \(gap) before the switch at \(b)")
                slow += 1
            } else {
                #expect(abs(gap - 1.0 / 240) < 2e-4, "gap \(gap) after the switch at \(b)")
                fast += 1
            }
        }
        #expect(slow >= 29 && fast >= 239)
        print("seed003: change reported at PTS \(reported.seconds) s; \(before.count) frames at 30 fps, \(after.count) at 240 fps; file \(stamps.count) frames, \(slow) gaps of 1/30, \(fast) of 1/240")
    }
}

/// Remembers a recording's finish.
final class FinishRecorder: CaptureFileOutputRecordingDelegate {
    let finished = Locked<(summary: RecordingSummary, error: CaptureError?)?>(nil)
    func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                    summary: RecordingSummary, error: CaptureError?) {
        finished.withLock { $0 = (summary, error) }
    }
    func wait() async -> (summary: RecordingSummary, error: CaptureError?)? {
        await waitUntil(timeout: .seconds(30)) { finished.withLock { $0 } != nil }
        if let f = finished.withLock({ $0 }) { return f }
        return nil
    }
}

extension LiveReconfigurationTests {
    /// A size change while recording: the movie ends cleanly with `sessionConfigurationChanged` (as
    /// AVFoundation's AVErrorSessionConfigurationChanged, finished successfully), the file plays every
    /// frame of the old size; the data output delivers the new size from the first frame that has it,
    /// at the PTS the completion reports. The session keeps running.
    @Test func sizeChangeEndsTheMovieCleanlyAndDataOutputsFollow() async throws {
        let registry = CaptureKit.makeRegistry(seed: 5)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        let device = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: device))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        try session.addOutput(movie)
        let log = DeliveryLog()
        let data = VideoDataOutput()
        let queue = DispatchQueue(label: "delivery-log")
        data.alwaysDiscardsLateVideoFrames = false
        data.setSampleBufferDelegate(log, queue: queue)
        try session.addOutput(data)
        try session.enableManualStepping()
        try session.startRunning()
        defer { session.stopRunning() }
        let path = try TestSupport.temporaryDirectory() + "/size-change.mov"
        let finish = FinishRecorder()
        movie.startRecording(to: path, recordingDelegate: finish)
        try session.advance(toFrame: 15)
        let big = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 30, pixelFormat: .nv12))
        let changeTime = Locked<MediaTime?>(nil)
        try device.lockForConfiguration()
        try device.setActiveFormat(big) { pts in changeTime.withLock { $0 = pts } }
        device.unlockForConfiguration()
        #expect(session.sessionPreset == .inputPriority)
        try session.advance(toFrame: 30)
        let result = try #require(await finish.wait())
        #expect(session.isRunning)
        session.stopRunning()
        queue.sync {}
        guard case .sessionConfigurationChanged(let id, _, _)? = result.error else {
            Issue.record("expected sessionConfigurationChanged, got \(String(describing: result.error))")
            return
        }
        #expect(id == "sim:back")
        #expect(result.error?.recordingFinishedSuccessfully == true)
        #expect(result.summary.stopReason == "configurationChanged" && result.summary.fileIsUsable)
        let reported = try #require(changeTime.withLock { $0 })
        let entries = log.entries.withLock { $0 }
        let small = entries.filter { $0.width == 640 }, large = entries.filter { $0.width == 1280 }
        #expect(large.first?.pts == reported && large.allSatisfy { $0.height == 720 })
        #expect(small.allSatisfy { $0.pts < reported && $0.height == 480 })
        #expect(entries.map(\.index) == (0..<Int64(entries.count)).map { $0 })
        // The file: every 640x480 frame, stamps in order, nothing of the new size.
        let stamps = try Self.decodedStamps(path)
        #expect(stamps.count == small.count && stamps.count == result.summary.videoFrames)
        #expect(stamps.allSatisfy { $0.width == 640 })
        #expect(stamps.map(\.index) == (0..<UInt32(stamps.count)).map { Optional($0) })
        print("size change: reported at \(reported.seconds) s; file \(stamps.count) frames of 640x480; data output \(small.count) small + \(large.count) large")
    }

    /// Session presets changed while running re-pick the format at the next frame boundary.
    @Test func presetChangeWhileRunningRepicksTheFormat() async throws {
        let registry = CaptureKit.makeRegistry(seed: 6)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        let device = try registry.device(uniqueID: "sim:back")
        try session.addInput(CaptureDeviceInput(device: device))
        let log = DeliveryLog()
        let data = VideoDataOutput()
        let queue = DispatchQueue(label: "delivery-log")
        data.alwaysDiscardsLateVideoFrames = false
        data.setSampleBufferDelegate(log, queue: queue)
        try session.addOutput(data)
        try session.enableManualStepping()
        try session.startRunning()
        defer { session.stopRunning() }
        try session.advance(toFrame: 10)
        try session.setSessionPreset(.hd1280x720)
        try session.advance(toFrame: 20)
        session.stopRunning()
        queue.sync {}
        let widths = log.entries.withLock { $0.map(\.width) }
        #expect(widths.count == 20)
        // Frame 10 may already have been made when the preset changed (one sample is pending per stream).
        let firstLarge = try #require(widths.firstIndex(of: 1280))
        #expect(firstLarge <= 11 && widths[..<firstLarge].allSatisfy { $0 == 640 } && widths[firstLarge...].allSatisfy { $0 == 1280 })
    }
}

extension LiveReconfigurationTests {
    /// Real time: the same change on a real-time session takes effect at a frame boundary; frames
    /// before the reported PTS lie on the 1/30 s grid, frames from it on the 1/60 s grid (a loaded
    /// machine may lose frames, never move them off the grid).
    @Test func realtimeRateChangeTakesEffectAtAFrameBoundary() async throws {
        let registry = CaptureKit.makeRegistry(seed: 7)
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        let device = try registry.device(uniqueID: "sim:back")
        let format = try #require(device.format(matching: Dimensions(width: 1280, height: 720), frameRate: 60, pixelFormat: .nv12))
        try device.lockForConfiguration()
        try device.setActiveFormat(format)
        device.unlockForConfiguration()
        try session.addInput(CaptureDeviceInput(device: device))
        let log = DeliveryLog()
        let data = VideoDataOutput()
        let queue = DispatchQueue(label: "delivery-log")
        data.setSampleBufferDelegate(log, queue: queue)
        try session.addOutput(data)
        try session.startRunning()
        defer { session.stopRunning() }
        try await eventually("6 frames logged", timeout: .seconds(600)) { log.entries.withLock { $0.count } >= 6 }
        let changeTime = Locked<MediaTime?>(nil)
        try device.lockForConfiguration()
        try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 60)) { pts in changeTime.withLock { $0 = pts } }
        try device.setActiveVideoMaxFrameDuration(MediaTime(value: 1, timescale: 60))
        device.unlockForConfiguration()
        try await eventually("the frame-rate change's completion", timeout: .seconds(600)) { changeTime.withLock { $0 } != nil }
        let reported = try #require(changeTime.withLock { $0 })
        try await eventually("12 frames at or after the reported change", timeout: .seconds(600)) { log.entries.withLock { $0.filter { $0.pts >= reported }.count } >= 12 }
        session.stopRunning()
        queue.sync {}
        let entries = log.entries.withLock { $0 }
        let before = entries.filter { $0.pts < reported }, after = entries.filter { $0.pts >= reported }
        #expect(after.first?.pts == reported, "the first frame at 60 fps is the one the completion names")
        func onGrid(_ gap: MediaTime, _ rate: Int32) -> Bool {
            let k = (gap.seconds * Double(rate)).rounded()
            return k >= 1 && abs(gap.seconds - k / Double(rate)) < 1e-6
        }
        for (a, b) in zip(before, before.dropFirst()) { #expect(onGrid(b.pts - a.pts, 30)) }
        for (a, b) in zip(after, after.dropFirst()) { #expect(onGrid(b.pts - a.pts, 60)) }
        if let last = before.last { #expect(onGrid(reported - last.pts, 30), "the change starts where a 30 fps frame ended") }
    }
}
