import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Collects what a session delivers (the first `limit` video frames drive it); may act on a frame
/// from the delivery thread (in virtual pace, before the next frame is made).
private final class FaultCollector: CaptureOutput {
    struct Item: Sendable {
        var mediaType: MediaType
        var pts: MediaTime
        var sequence: Int64
        var discontinuity: Discontinuity?
        var jpeg: [UInt8]?
    }
    let attachment = OutputAttachment()
    let items = Locked<[Item]>([])
    let limit: Int
    let onVideo: @Sendable (SampleBuffer) -> Void

    init(limit: Int, onVideo: @escaping @Sendable (SampleBuffer) -> Void = { _ in }) {
        self.limit = limit
        self.onVideo = onVideo
    }

    func accepts(_ mediaType: MediaType) -> Bool { true }
    var demand: OutputDemand { items.withLock { $0.filter { $0.mediaType == .video }.count } < limit ? .ready : .idle }

    func receive(_ sample: SampleBuffer, from connection: CaptureConnection) {
        var jpeg: [UInt8]?
        if let pixels = sample.pixelBuffer, pixels.format == .mjpeg { jpeg = pixels.withCompressedData { Array($0) } }
        items.withLock { $0.append(Item(mediaType: sample.mediaType, pts: sample.presentationTime, sequence: sample.sequenceNumber,
                                        discontinuity: sample.discontinuity, jpeg: jpeg)) }
        if sample.mediaType == .video { onVideo(sample) }
    }

    func sessionDidStop() {}

    var video: [Item] { items.withLock { $0.filter { $0.mediaType == .video } } }
    var audio: [Item] { items.withLock { $0.filter { $0.mediaType == .audio } } }
}

private struct Rig {
    let scenario: SimulatorScenario
    let registry: DeviceRegistry
    let session: CaptureSession

    /// `ownIDs`: the simulator's devices get "-<ownIDs>" after their IDs (as `DeviceRig` does), for
    /// a test whose outcome depends on the process-wide configuration lock of its camera.
    init(_ timeline: FaultTimeline, camera: String? = "sim:back", microphone: String? = nil, pixelFormat: PixelFormat? = nil,
         size: Dimensions = Dimensions(width: 640, height: 480), ownIDs: String? = nil) throws {
        scenario = SimulatorScenario()
        scenario.faults = timeline
        if let ownIDs {
            let profiles = try SimulatedDeviceProfile.builtIn().map { p -> SimulatedDeviceProfile in
                var p = p
                p.uniqueID += "-" + ownIDs
                return p
            }
            registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 3, profiles: profiles, scenario: scenario)])
        } else {
            registry = CaptureKit.makeRegistry(seed: 3, scenario: scenario)
        }
        session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        if let camera {
            let device = try registry.device(uniqueID: camera)
            let format = try require(device.format(matching: size, frameRate: 30, pixelFormat: pixelFormat))
            try device.lockForConfiguration()
            try device.setActiveFormat(format)
            try device.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 30))
            device.unlockForConfiguration()
            try session.addInput(CaptureDeviceInput(device: device))
        }
        if let microphone { try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: microphone))) }
    }

    /// Runs until the collector has its frames or the session stops by itself.
    func run(_ collector: FaultCollector) async throws {
        try session.addOutput(collector)
        try session.startRunning()
        await waitUntil(timeout: .seconds(60)) {
            !(session.isRunning || session.isInterrupted) || collector.video.count >= collector.limit
        }
        session.stopRunning()
    }
}

private func seconds(_ s: Double) -> MediaTime { MediaTime(seconds: s, preferredTimescale: 1_000_000) }

@Suite(.timeLimit(.minutes(10))) struct FaultTimelineTests {
    // MARK: Video

    @Test func dropFramesLosesExactlyThoseFramesAndReportsTheGap() async throws {
        // A burst of 3 at frame 10, and 2 more at 1.5 s (frame 45).
        let rig = try Rig(FaultTimeline([FaultEvent(at: .frame(10), device: "sim:back", fault: .dropFrames(count: 3)),
                                         FaultEvent(at: .time(seconds(1.5)), device: "sim:back", fault: .dropFrames(count: 2))]))
        let collector = FaultCollector(limit: 55)
        try await rig.run(collector)
        let video = collector.video.prefix(55)
        let delivered = Set(video.map(\.sequence))
        let missing = (0...video.last!.sequence).filter { !delivered.contains($0) }
        #expect(missing == [10, 11, 12, 45, 46])
        #expect(video.first { $0.sequence == 13 }?.discontinuity == Discontinuity(count: 3, reason: .discontinuity))
        #expect(video.first { $0.sequence == 47 }?.discontinuity == Discontinuity(count: 2, reason: .discontinuity))
        #expect(video.filter { $0.discontinuity != nil }.count == 2)
        // PTS stay on the frame grid: the lost frames' time is a gap.
        for item in video { #expect(item.pts == MediaTime(value: item.sequence, timescale: 30) || abs((item.pts - MediaTime(value: item.sequence, timescale: 30)).seconds) < 1e-6) }
    }

    @Test func jitterMovesOnlyTheScriptedFramesDeterministically() async throws {
        func take() async throws -> [FaultCollector.Item] {
            let rig = try Rig(FaultTimeline([FaultEvent(at: .frame(20), device: "sim:back", fault: .jitter(microseconds: 2000, frames: 5))]))
            let collector = FaultCollector(limit: 30)
            try await rig.run(collector)
            return Array(collector.video.prefix(30))
        }
        let first = try await take(), second = try await take()
        #expect(first.map(\.pts) == second.map(\.pts))
        var moved: [Int64] = []
        for item in first {
            let error = (item.pts - MediaTime(value: item.sequence, timescale: 30)).seconds
            #expect(abs(error) <= 0.002 + 1e-6)
            if abs(error) > 1e-6 { moved.append(item.sequence) }
        }
        #expect(Set(moved).isSubset(of: Set(20...24)))
        #expect(moved.count >= 3, "jitter moved \(moved)")
    }

    @Test func stallLosesTheFramesOfItsSpanAsOneGap() async throws {
        // 100 ms from 0.5 s: frames 15, 16 and 17 start inside it.
        let rig = try Rig(FaultTimeline([FaultEvent(at: .time(seconds(0.5)), device: "sim:back", fault: .stall(milliseconds: 100))]))
        let collector = FaultCollector(limit: 25)
        try await rig.run(collector)
        let video = collector.video.prefix(25)
        #expect(video.map(\.sequence) == Array(0...14) + Array(18...27))
        #expect(video.first { $0.sequence == 18 }?.discontinuity == Discontinuity(count: 3, reason: .discontinuity))
        #expect(video.first { $0.sequence == 18 }?.pts == MediaTime(value: 18, timescale: 30))
    }

    @Test func duplicateFrameDeliversTheSameFrameTwice() async throws {
        let rig = try Rig(FaultTimeline([FaultEvent(at: .frame(7), device: "sim:back", fault: .duplicateFrame)]))
        let collector = FaultCollector(limit: 12)
        try await rig.run(collector)
        let video = collector.video.prefix(12)
        #expect(video.map(\.sequence) == [0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 9, 10])
        #expect(video[7].pts == video[8].pts)
    }

    @Test(arguments: FrameCorruption.allCases)
    func corruptFrameDamagesTheJPEGAndThePassThroughRecordingSkipsIt(_ kind: FrameCorruption) async throws {
        let timeline = FaultTimeline([FaultEvent(at: .frame(5), device: "sim:webcam", fault: .corruptFrame(kind))])
        let rig = try Rig(timeline, camera: "sim:webcam", pixelFormat: .mjpeg)
        let collector = FaultCollector(limit: 10)
        try await rig.run(collector)
        let frames = collector.video.prefix(10)
        #expect(frames.map(\.sequence) == Array(0...9))
        for frame in frames {
            let jpeg = try #require(frame.jpeg)
            let whole = jpeg.prefix(2) == [0xFF, 0xD8] && jpeg.suffix(2) == [0xFF, 0xD9]
            if frame.sequence == 5 {
                switch kind {
                case .truncated: #expect(!whole && jpeg.prefix(2) == [0xFF, 0xD8])
                case .badMarker: #expect(jpeg.prefix(2) == [0x00, 0x00])
                case .garbage:
                    // The headers and EOI stay; the picture is not the one rendered (or none at all:
                    // random bytes hold markers libjpeg refuses).
                    #expect(whole)
                    #expect((try? FixtureTestSupport.luma(ofJPEG: jpeg)) ?? nil != 5)
                }
            } else {
                #expect(whole)
                #expect(try FixtureTestSupport.luma(ofJPEG: jpeg) == UInt32(frame.sequence))
            }
        }

        // The same fault under a pass-through recording: the file goes on and plays.
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let recording = try Rig(timeline, camera: "sim:webcam", pixelFormat: .mjpeg)
        let movie = MovieFileOutput()
        movie.settings.videoMode = .passthrough
        movie.maxRecordedDuration = MediaTime(value: 1, timescale: 1)
        try recording.session.addOutput(movie)
        try recording.session.startRunning()
        defer { recording.session.stopRunning() }
        let summary = try await movie.record(to: dir + "/corrupt.mov")
        let decode = try TestSupport.run("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                                     "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", dir + "/corrupt.mov"])
        #expect(decode.status == 0)
        switch kind {
        case .truncated, .badMarker:
            let report = try TestSupport.analyze(dir + "/corrupt.mov")
            // Not a whole JPEG: left out and counted, as for a frame damaged on the bus.
            #expect(summary.invalidFramesSkipped == 1)
            #expect(report.droppedIndices == [5])
            #expect(Int(decode.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == 29)
        case .garbage:
            // A whole JPEG with wrong data: written (a decoder shows what it can).
            #expect(summary.invalidFramesSkipped == 0)
            #expect(Int(decode.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == 30)
        }
    }

    // MARK: Devices

    @Test func unplugEndsTheStreamAtItsFrameAndReplugMakesANewDevice() async throws {
        let timeline = FaultTimeline([FaultEvent(at: .frame(10), device: "sim:back", fault: .unplug),
                                      FaultEvent(at: .time(seconds(2)), device: "sim:back", fault: .replug)])
        let rig = try Rig(timeline)
        let before = try rig.registry.device(uniqueID: "sim:back")
        let events = rig.session.eventStream()
        let collector = FaultCollector(limit: 100)
        try await rig.run(collector)
        #expect(collector.video.map(\.sequence) == Array(0...9))
        var sawError = false
        for await event in events {
            if case .runtimeError(.deviceDisconnected("sim:back")) = event { sawError = true }
            if case .stopped = event { break }
        }
        #expect(sawError)
        #expect(!before.isConnected)
        #expect(rig.scenario.firedFaultEvents == [0])
        // Nothing streams now: the harness moves the fault clock on, and the camera comes back.
        #expect(rig.scenario.advanceFaultClock(to: seconds(2)) == 1)
        let after = try rig.registry.device(uniqueID: "sim:back")
        #expect(after !== before && after.isConnected)
    }

    /// On its own device ID: configuration locks are process-wide by ID, so while a parallel test
    /// held sim:back's lock (same client) this test's lock nested in it without asking the driver,
    /// and frame 10 read "locked" (CI, once).
    @Test func anotherProcessTakesAndReleasesTheConfigurationPriority() async throws {
        let camera = "sim:back-priority"
        let timeline = FaultTimeline([FaultEvent(at: .frame(5), device: camera, fault: .configurationPriorityTaken(holder: "pid 99 (other)")),
                                      FaultEvent(at: .frame(15), device: camera, fault: .configurationPriorityReleased)])
        let rig = try Rig(timeline, camera: camera, ownIDs: "priority")
        let device = try rig.registry.device(uniqueID: camera)
        let results = Locked<[Int64: String]>([:])
        let collector = FaultCollector(limit: 20) { sample in
            guard [2, 10, 18].contains(sample.sequenceNumber) else { return }
            do {
                try device.lockForConfiguration()
                device.unlockForConfiguration()
                results.withLock { $0[sample.sequenceNumber] = "locked" }
            } catch {
                results.withLock { $0[sample.sequenceNumber] = "\(error)" }
            }
        }
        try await rig.run(collector)
        let seen = results.withLock { $0 }
        #expect(seen[2] == "locked" && seen[18] == "locked")
        #expect(seen[10]?.contains("pid 99 (other)") == true, "\(seen)")
    }

    // MARK: Audio

    @Test func audioGapSkipsSamplesAndTheNextBufferSaysSo() async throws {
        let rig = try Rig(FaultTimeline([FaultEvent(at: .time(seconds(0.5)), device: "sim:mic", fault: .audioGap(milliseconds: 100))]),
                          microphone: "sim:mic")
        let collector = FaultCollector(limit: 30)
        try await rig.run(collector)
        let audio = collector.audio
        let rate = try #require(audio.first.map { _ in 48_000 })
        let gapped = try #require(audio.firstIndex { $0.discontinuity != nil })
        #expect(audio[gapped].discontinuity == Discontinuity(count: rate / 10, reason: .discontinuity))
        let previous = audio[gapped - 1], next = audio[gapped]
        let step = next.sequence - previous.sequence
        let length = audio[1].sequence - audio[0].sequence
        #expect(step == length + Int64(rate / 10))
        #expect(previous.pts.seconds < 0.5 && abs((next.pts - previous.pts).seconds - (Double(length) / Double(rate) + 0.1)) < 1e-6)
        #expect(audio.filter { $0.discontinuity != nil }.count == 1)
    }

    @Test func clockDriftGrowsTheRecordedAVOffset() async throws {
        func offsets(_ timeline: FaultTimeline) async throws -> [Double] {
            let dir = try TestSupport.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let rig = try Rig(timeline, microphone: "sim:mic")
            let movie = MovieFileOutput()
            movie.settings.preset = .ultrafast
            movie.maxRecordedDuration = MediaTime(value: 3, timescale: 1) + MediaTime(value: 1, timescale: 10)
            try rig.session.addOutput(movie)
            try rig.session.startRunning()
            defer { rig.session.stopRunning() }
            _ = try await movie.record(to: dir + "/drift.mp4")
            let report = try TestSupport.analyze(dir + "/drift.mp4")
            return report.syncMarkers.compactMap(\.offset)
        }
        let clean = try await offsets(FaultTimeline())
        let drifting = try await offsets(FaultTimeline([FaultEvent(at: .time(.zero), device: "sim:mic", fault: .clockDrift(ppm: 20_000))]))
        try #require(clean.count >= 3 && drifting.count >= 3, "markers \(clean) \(drifting)")
        // 20 000 ppm: the audio runs 20 ms a second late against video (offset = video − audio).
        for second in 0..<3 {
            #expect(abs((drifting[second] - clean[second]) + 0.02 * Double(second + 1)) < 0.003,
                    "second \(second + 1): \(drifting[second]) vs \(clean[second])")
        }
    }

    // MARK: Session and system

    @Test func interruptionStopsDeliveryAtItsTimeAndTheSessionResumes() async throws {
        let timeline = FaultTimeline([FaultEvent(at: .time(seconds(1)), fault: .interruptionBegan),
                                      FaultEvent(at: .time(seconds(1.5)), fault: .interruptionEnded)])
        let rig = try Rig(timeline)
        let seen = Locked<[String]>([])
        let events = rig.session.eventStream()
        let listener = Task {
            for await event in events {
                switch event {
                case .interrupted(let reason): seen.withLock { $0.append("interrupted(\(reason))") }
                case .interruptionEnded: seen.withLock { $0.append("ended") }
                default: break
                }
            }
        }
        let collector = FaultCollector(limit: 40)
        try await rig.run(collector)
        // The listener reads the buffered events on its own schedule.
        await waitUntil(timeout: .seconds(30)) { seen.withLock { $0.count } >= 2 }
        listener.cancel()
        let video = collector.video.prefix(40)
        // Frames 0…29 (to 1 s), then a new stream: sequence numbers restart; the session resumes
        // at its virtual now (the last delivered PTS), so virtual time did not pass meanwhile.
        #expect(video.prefix(30).map(\.sequence) == Array(0...29))
        #expect(video.dropFirst(30).map(\.sequence) == Array(0...9))
        #expect(video[30].pts >= video[29].pts && video[30].pts < MediaTime(value: 1, timescale: 1) + MediaTime(value: 1, timescale: 30))
        #expect(seen.withLock { $0 } == ["interrupted(videoDeviceInUseByAnotherClient)", "ended"])
    }

    @Test func authorizationChangesAtItsTime() async throws {
        let timeline = FaultTimeline([FaultEvent(at: .frame(0), device: nil, fault: .authorization(mediaType: .audio, status: .denied)),
                                      FaultEvent(at: .time(seconds(0.5)), fault: .authorization(mediaType: .audio, status: .authorized))])
        // Frame-timed session events are refused by validation; time 0 instead.
        var fixed = timeline
        fixed.events[0].at = .time(.zero)
        let rig = try Rig(fixed)
        let statuses = Locked<[Int64: AuthorizationStatus]>([:])
        let scenario = rig.scenario
        let collector = FaultCollector(limit: 20) { sample in
            if [3, 16].contains(sample.sequenceNumber) {
                statuses.withLock { $0[sample.sequenceNumber] = scenario.authorizationStatus(for: .audio) }
            }
        }
        try await rig.run(collector)
        #expect(statuses.withLock { $0 } == [3: .denied, 16: .authorized])
        #expect(throws: CaptureError.self) {
            try timeline.validate(devices: [FaultTimeline.Device(uniqueID: "sim:back", mediaType: .video)])
        }
    }

    // MARK: Validation

    @Test func validationNamesTheEventAndWhatIsAllowed() throws {
        let devices = [FaultTimeline.Device(uniqueID: "sim:back", mediaType: .video, pixelFormat: .yuv420,
                                            frameDuration: MediaTime(value: 1, timescale: 30)),
                       FaultTimeline.Device(uniqueID: "sim:webcam", mediaType: .video, pixelFormat: .mjpeg),
                       FaultTimeline.Device(uniqueID: "sim:mic", mediaType: .audio)]
        func problem(_ event: FaultEvent, duration: MediaTime? = seconds(3)) -> String? {
            let timeline = FaultTimeline([FaultEvent(at: .frame(1), device: "sim:back", fault: .dropFrames(count: 1)), event])
            do {
                try timeline.validate(devices: devices, duration: duration)
                return nil
            } catch {
                guard case .invalidFaultEvent(1, _, _) = error else { return "wrong error \(error)" }
                return error.description
            }
        }
        #expect(problem(FaultEvent(at: .time(seconds(1)), device: "sim:nope", fault: .unplug))?.contains("unknown device 'sim:nope'") == true)
        #expect(problem(FaultEvent(at: .time(seconds(-1)), device: "sim:back", fault: .unplug))?.contains("negative") == true)
        #expect(problem(FaultEvent(at: .time(seconds(4)), device: "sim:back", fault: .unplug))?.contains("past the end") == true)
        #expect(problem(FaultEvent(at: .frame(91), device: "sim:back", fault: .unplug))?.contains("0…90") == true)
        #expect(problem(FaultEvent(at: .frame(3), device: "sim:back", fault: .corruptFrame(.garbage)))?.contains("not MJPEG") == true)
        #expect(problem(FaultEvent(at: .frame(3), device: "sim:webcam", fault: .corruptFrame(.garbage))) == nil)
        #expect(problem(FaultEvent(at: .frame(3), device: "sim:mic", fault: .audioGap(milliseconds: 5)))?.contains("frame indices exist for cameras only") == true)
        #expect(problem(FaultEvent(at: .time(.zero), device: "sim:back", fault: .audioGap(milliseconds: 5)))?.contains("an audio device") == true)
        #expect(problem(FaultEvent(at: .time(.zero), device: "sim:mic", fault: .stall(milliseconds: 5)))?.contains("a video device") == true)
        #expect(problem(FaultEvent(at: .time(.zero), fault: .dropFrames(count: 1)))?.contains("names no device") == true)
        #expect(problem(FaultEvent(at: .time(.zero), device: "sim:back", fault: .diskFull(bytes: 10)))?.contains("no device") == true)
        #expect(problem(FaultEvent(at: .time(.zero), device: "sim:back", fault: .replug))?.contains("no unplug before it") == true)
        #expect(problem(FaultEvent(at: .time(.zero), device: "sim:back", fault: .dropFrames(count: 0)))?.contains("count ≥ 1") == true)
        #expect(problem(FaultEvent(at: .time(.zero), fault: .diskFull(bytes: 1_000_000))) == nil)
        #expect(problem(FaultEvent(at: .time(seconds(9)), fault: .interruptionBegan), duration: nil) == nil)
    }

    @Test func aFaultPastTheRunNeverFires() async throws {
        let rig = try Rig(FaultTimeline([FaultEvent(at: .time(seconds(60)), device: "sim:back", fault: .unplug)]))
        let collector = FaultCollector(limit: 15)
        try await rig.run(collector)
        #expect(collector.video.prefix(15).map(\.sequence) == Array(0...14))
        #expect(rig.scenario.firedFaultEvents.isEmpty)
    }

    // MARK: Outputs

    final class FinishSpy: CaptureFileOutputRecordingDelegate {
        let calls = Locked<[(RecordingSummary, CaptureError?)]>([])
        func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                        summary: RecordingSummary, error: CaptureError?) {
            calls.withLock { $0.append((summary, error)) }
        }
    }

    /// Records sim:back + sim:mic with the timeline's output faults; returns the finish call.
    private func record(_ timeline: FaultTimeline, seconds: Int, to path: String) async throws -> (RecordingSummary, CaptureError?) {
        let rig = try Rig(timeline, microphone: "sim:mic")
        let movie = MovieFileOutput()
        movie.settings.preset = .ultrafast
        movie.settings.videoBitrate = 2_000_000
        movie.movieFragmentInterval = MediaTime(value: 1, timescale: 1)
        movie.maxRecordedDuration = MediaTime(value: Int64(seconds), timescale: 1)
        // Not set: the recording takes the scenario's output faults by itself.
        #expect(movie.outputFaults.isEmpty && !rig.scenario.faults.outputFaults.isEmpty)
        try rig.session.addOutput(movie)
        try rig.session.startRunning()
        defer { rig.session.stopRunning() }
        let spy = FinishSpy()
        movie.startRecording(to: path, recordingDelegate: spy)
        await waitUntil(timeout: .seconds(120)) { !spy.calls.withLock { $0.isEmpty } }
        rig.session.stopRunning()
        let calls = spy.calls.withLock { $0 }
        try #require(calls.count == 1)
        return calls[0]
    }

    @Test func diskFullEndsLikeARealFullDiskWithAPlayableFile() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/full.mov"
        let (summary, error) = try await record(FaultTimeline([FaultEvent(at: .time(.zero), fault: .diskFull(bytes: 150_000))]),
                                                seconds: 10, to: path)
        guard case .diskFull(let errorPath, let bytes, let seconds) = error else {
            Issue.record("expected diskFull, got \(String(describing: error)), file \(summary.fileSize) bytes")
            return
        }
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? -1
        #expect(errorPath == path && summary.stopReason == "diskFull" && summary.fileIsUsable)
        #expect(bytes == size && size <= 150_000 && size > 0, "kept \(bytes) bytes, file \(size)")
        #expect(seconds >= 1 && seconds < 10)
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
        let report = try TestSupport.analyze(path)
        #expect(report.videoFrameCount == summary.videoFrames && report.droppedCount == 0)
    }

    @Test func slowEncoderAndSlowDiskLoseNothingInVirtualTime() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/slow.mp4"
        let start = ContinuousClock.now
        let (summary, error) = try await record(FaultTimeline([FaultEvent(at: .time(.zero), fault: .slowEncoder(milliseconds: 40)),
                                                               FaultEvent(at: .time(MediaTime(value: 1, timescale: 2)), fault: .slowDisk(milliseconds: 5))]),
                                                seconds: 2, to: path)
        let elapsed = ContinuousClock.now - start
        #expect(error == nil || error?.recordingFinishedSuccessfully == true, "\(String(describing: error))")
        // 60 frames at ≥ 40 ms each: the encoder really was slow, and virtual time waited for it.
        #expect(elapsed >= .milliseconds(2400), "took \(elapsed)")
        #expect(summary.videoFrames == 60)
        let report = try TestSupport.analyze(path)
        #expect(report.videoFrameCount == 60 && report.isClean)
    }
}
