import CaptureKit
import Foundation
import Testing

/// The movie file output's contract: limits with typed reasons, crash-safe fragments,
/// pause/resume, rotation as display matrix, codecs and containers.
@Suite struct MovieOutputTests {
    struct Rig {
        let session: CaptureSession
        let movie: MovieFileOutput
        let dir: String
    }

    private func rig(audio: Bool = true, preset: SessionPreset = .vga640x480, manualStepping: Bool = false) throws -> Rig {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        if manualStepping { try session.enableManualStepping() }
        try session.setSessionPreset(preset)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        if audio { try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic"))) }
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        movie.settings = settings
        try session.addOutput(movie)
        try session.startRunning()
        return Rig(session: session, movie: movie, dir: try TestSupport.temporaryDirectory())
    }

    private func decodesCleanly(_ path: String) throws -> Bool {
        let result = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        return result.status == 0 && result.stderr.isEmpty
    }

    @Test func fileSizeLimitStopsBeforeTheLimitWithAUsableFile() async throws {
        let r = try rig()
        defer { r.session.stopRunning() }
        r.movie.maxRecordedFileSize = 150_000
        let path = r.dir + "/size.mp4"
        let summary = try await r.movie.record(to: path)
        #expect(summary.stopReason == "maximumFileSize")
        #expect(summary.fileIsUsable)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(size <= 150_000, "file is \(size) bytes")
        #expect(size >= 100_000, "stopped far too early at \(size) bytes")
        #expect(try decodesCleanly(path))
        #expect(try TestSupport.analyze(path).isClean)
    }

    @Test func lowFreeDiskSpaceStopsWithDiskFull() async throws {
        let r = try rig()
        defer { r.session.stopRunning() }
        // A simulated volume that loses 1 MB per query, starting with 100 MB free.
        let queries = Locked(0)
        r.movie.freeDiskSpace = { _ in
            queries.withLock { q in
                q += 1
                return 100_000_000 - Int64(q) * 1_000_000
            }
        }
        r.movie.minFreeDiskSpaceLimit = 40_000_000
        let path = r.dir + "/disk.mp4"
        let summary = try await r.movie.record(to: path)
        #expect(summary.stopReason == "diskFull")
        // The 61st query (free 39 MB) is the first below the limit: one query per written sample.
        #expect(queries.withLock { $0 } == 61)
        #expect(summary.fileIsUsable)
        #expect(try decodesCleanly(path))
    }

    @Test func durationLimitIsFrameAccurateAndTyped() async throws {
        let r = try rig()
        defer { r.session.stopRunning() }
        r.movie.maxRecordedDuration = MediaTime(value: 7, timescale: 6)  // 1.1667 s = 35 frames
        let delegateError = Locked<CaptureError?>(nil)
        let summary = try await r.movie.record(to: r.dir + "/duration.mp4")
        _ = delegateError
        #expect(summary.stopReason == "maximumDuration")
        #expect(summary.videoFrames == 35)
        #expect(abs(summary.duration - 35.0 / 30) < 1e-9)
    }

    @Test func pauseCutsThePausedFramesOut() async throws {
        let path = try TestSupport.temporaryDirectory() + "/paused.mp4"
        let recording = Task { try await TestSupport.recordPausedSecond(to: path) }
        let summary = try await recording.value
        #expect(summary.pausedDuration == 1.0)
        #expect(summary.videoFrames == 60)
        let report = try TestSupport.analyze(path)
        let indices = report.frameIndices.compactMap { $0 }
        // Frames 0…29 then 60…89: exactly the paused second is missing, PTS stay continuous.
        #expect(indices == Array(0...29) + Array(60...89))
        #expect(report.droppedIndices == Array(30...59))
        // Audio is cut at the same instants as video, to the sample: the marker after the pause stays in sync.
        let offsets = report.syncMarkers.compactMap(\.offset)
        #expect(!offsets.isEmpty && offsets.allSatisfy { abs($0) <= 0.001 }, "A/V offsets \(offsets) after pause/resume")
        let streams = try TestSupport.probeStreams(path)
        let videoDuration = Double(streams.first { $0["codec_type"] as? String == "video" }?["duration"] as? String ?? "") ?? 0
        #expect(abs(videoDuration - 2.0) < 0.001)
    }

    @Test func rotationAndMirroringBecomeTheDisplayMatrix() async throws {
        let r = try rig(audio: false)
        defer { r.session.stopRunning() }
        let video = try #require(r.movie.attachment.connections.first)
        try video.setVideoRotationAngle(90)
        r.movie.maxRecordedDuration = MediaTime(value: 1, timescale: 2)
        let path = r.dir + "/rotated.mp4"
        _ = try await r.movie.record(to: path)
        let probe = try TestSupport.run("ffprobe", ["-v", "error", "-show_streams", "-of", "json", path])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any])
        let stream = try #require((json["streams"] as? [[String: Any]])?.first)
        let sideData = try #require(stream["side_data_list"] as? [[String: Any]])
        // FFmpeg reports counter-clockwise degrees: a 90° clockwise display rotation reads −90.
        #expect(sideData.first?["rotation"] as? Int == -90)
        #expect(stream["width"] as? Int == 640, "pixels stay unrotated; players rotate")

        try video.setVideoMirrored(true)
        _ = try await r.movie.record(to: r.dir + "/mirrored.mp4")
        let mirrored = try TestSupport.run("ffprobe", ["-v", "error", "-show_streams", "-of", "json", r.dir + "/mirrored.mp4"])
        let mirroredJSON = try #require(try JSONSerialization.jsonObject(with: Data(mirrored.stdout.utf8)) as? [String: Any])
        let mirroredMatrix = (((mirroredJSON["streams"] as? [[String: Any]])?.first?["side_data_list"] as? [[String: Any]])?
            .first?["displaymatrix"] as? String)
        #expect(mirroredMatrix != nil)
        #expect(mirroredMatrix != sideData.first?["displaymatrix"] as? String, "mirroring changes the matrix")
        // Decoded with autorotation the picture is portrait-shaped.
        let frame = r.dir + "/rotated.png"
        let extract = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-vframes", "1", frame])
        #expect(extract.status == 0)
        let size = try TestSupport.run("ffprobe", ["-v", "error", "-show_entries", "stream=width,height", "-of", "csv=p=0", frame])
        #expect(size.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "480,640")
    }

    @Test func movContainerAndMJPEGCodec() async throws {
        let r = try rig()
        defer { r.session.stopRunning() }
        var settings = r.movie.settings
        settings.codec = .mjpeg
        r.movie.settings = settings
        r.movie.maxRecordedDuration = MediaTime(value: 1, timescale: 1)
        let path = r.dir + "/motion.mov"
        let summary = try await r.movie.record(to: path)
        #expect(summary.videoFrames == 30)
        let streams = try TestSupport.probeStreams(path)
        #expect(streams.map { $0["codec_name"] as? String } == ["mjpeg", "aac"])
        #expect(try decodesCleanly(path))
        let report = try TestSupport.analyze(path)
        #expect(report.frameIndices.compactMap { $0 } == Array(0..<30))
    }

    @Test func iFramePresetRecordsEveryFrameAsAKeyframe() async throws {
        let r = try rig(audio: false, preset: .iFrame1280x720)
        defer { r.session.stopRunning() }
        r.movie.maxRecordedDuration = MediaTime(value: 1, timescale: 2)
        let path = r.dir + "/iframe.mov"
        _ = try await r.movie.record(to: path)
        let probe = try TestSupport.run("ffprobe", ["-v", "error", "-select_streams", "v", "-show_entries",
                                                    "frame=key_frame,width", "-of", "csv=p=0", path])
        let rows = probe.stdout.split(separator: "\n")
        #expect(rows.count == 15)
        #expect(rows.allSatisfy { $0.hasPrefix("1,1280") }, "every frame a keyframe: \(rows)")
    }

    @Test func stopRecordingBeforeAnyFrameStillFinishesOnce() async throws {
        // Manual stepping: nothing is delivered before an advance, so no frame can reach the output
        // between the two calls below. (Free-running, the pump thread wakes on the start's demand
        // and can deliver a frame before the stop: CI under ASan once saw the recording start.)
        let r = try rig(manualStepping: true)
        defer { r.session.stopRunning() }
        let path = r.dir + "/never.mp4"
        let delegate = RecordingFinished()
        r.movie.startRecording(to: path, recordingDelegate: delegate)
        r.movie.stopRecording()
        #expect(!r.movie.isRecording)
        // Give a second finish every chance: wait for the first, stop the session (outputs finish
        // what is left), then flush the output's delegate queue.
        #expect(await waitFor(timeout: .seconds(30)) { delegate.finishCount > 0 })
        r.session.stopRunning()
        await r.movie.flushDelegateQueue()
        #expect(delegate.finishCount == 1, "the recording finished \(delegate.finishCount) times")
        #expect(delegate.errors.first == .some(.noDataRecorded))
        #expect(delegate.startCount == 0)
        #expect(!FileManager.default.fileExists(atPath: path))
    }
}
