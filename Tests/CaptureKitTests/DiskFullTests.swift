import CaptureKit
import Foundation
import Testing

/// A small tmpfs, mounted for one test and unmounted after: a real filesystem that fills up.
/// Mounting needs root (CAP_SYS_ADMIN); where it is refused the suite is skipped with that reason.
final class SmallDisk {
    let path: String

    init(size: String) throws {
        path = try TestSupport.temporaryDirectory()
        let result = try TestSupport.run("mount", ["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", path])
        guard result.status == 0 else {
            try? FileManager.default.removeItem(atPath: path)
            throw CaptureError.fileOperationFailed(path: path, reason: "mount failed: \(result.stderr)")
        }
    }

    func unmount() {
        _ = try? TestSupport.run("umount", [path])
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Fills the disk up to `free` bytes of free space.
    func fill(leaving free: Int) throws {
        var info = statvfs()
        guard statvfs(path, &info) == 0 else { return }
        let available = Int(info.f_bavail) * Int(info.f_frsize)
        guard available > free else { return }
        _ = try TestSupport.run("fallocate", ["-l", String(available - free), path + "/filler"])
    }

    /// Whether this process may mount a tmpfs (tried once).
    static let mountable: Bool = {
        guard getuid() == 0, let disk = try? SmallDisk(size: "64k") else { return false }
        disk.unmount()
        return true
    }()

    static let skipReason: Comment = "mounting a tmpfs needs root (CAP_SYS_ADMIN); run as root, or in the VM (ci/vm-run)"
}

/// Write errors are never silent: recording onto a filesystem that fills up (a real tmpfs) ends
/// with a typed `diskFull`, once, and leaves a file that decodes to its last frame.
@Suite(.serialized, .enabled(if: SmallDisk.mountable, SmallDisk.skipReason), .timeLimit(.minutes(10)))
struct DiskFullTests {
    /// ffmpeg decodes every packet without a word, and every video packet becomes a frame.
    private func decodesToTheLastFrame(_ path: String) throws -> (frames: Int, duration: Double) {
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "ffmpeg: \(decode.stderr)")
        let probe = try TestSupport.run("ffprobe", ["-v", "error", "-count_frames", "-count_packets", "-select_streams", "v:0",
                                                    "-show_entries", "stream=nb_read_frames,nb_read_packets:format=duration",
                                                    "-of", "json", path])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(probe.stdout.utf8)) as? [String: Any])
        let stream = try #require((json["streams"] as? [[String: Any]])?.first)
        let frames = Int(stream["nb_read_frames"] as? String ?? "") ?? -1
        let packets = Int(stream["nb_read_packets"] as? String ?? "") ?? -2
        #expect(frames == packets, "\(packets) video packets but \(frames) decoded frames")
        let duration = Double((json["format"] as? [String: Any])?["duration"] as? String ?? "") ?? 0
        return (frames, duration)
    }

    private func size(_ path: String) -> Int64 {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int64) ?? -1
    }

    /// Must-show 0 of issue 12: the CLI on a 2 MB tmpfs.
    @Test func recordOntoAFullDiskFailsNamingItAndKeepsAPlayableFile() async throws {
        let disk = try SmallDisk(size: "2m")
        defer { disk.unmount() }
        let path = disk.path + "/full.mp4"
        let result = try await offPool(CommandLineTests.binary, [
            "record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "60", "--size", "1280x720",
            "--pace", "virtual", "--preset", "ultrafast", "--bitrate", "4000000", "--fragment-interval", "1", path,
        ])
        #expect(result.status != 0, "exited 0: \(result.stdout)")
        #expect(result.stderr.contains("is full"), "\(result.stderr)")
        // "kept 58.000 s in 2092433 bytes": how much, in time and in bytes.
        let kept = try #require(result.stderr.firstMatch(of: /kept ([0-9.]+) s in ([0-9]+) bytes/), "\(result.stderr)")
        let seconds = try #require(Double(kept.1))
        let bytes = try #require(Int64(kept.2))
        #expect(bytes == size(path))
        #expect(bytes > 1_500_000, "only \(bytes) bytes kept of 2 MB")
        let decoded = try decodesToTheLastFrame(path)
        #expect(abs(Double(decoded.frames) / 30 - seconds) < 0.05, "\(decoded.frames) frames for \(seconds) s")
        #expect(decoded.frames > 30)
        // What was kept is whole: inspect finds no damage.
        let inspect = try TestSupport.run(CommandLineTests.binary, ["inspect", path])
        #expect(inspect.status == 0 && !inspect.stdout.contains("DAMAGED"), "\(inspect.stdout)\(inspect.stderr)")
    }

    final class FinishSpy: CaptureFileOutputRecordingDelegate {
        let calls = Locked<[(RecordingSummary, CaptureError?)]>([])
        func fileOutput(_ output: MovieFileOutput, didFinishRecordingTo path: String, from connections: [CaptureConnection],
                        summary: RecordingSummary, error: CaptureError?) {
            calls.withLock { $0.append((summary, error)) }
        }
    }

    @Test(arguments: ["mov", "mkv"])
    func movieOutputEndsOnceWithDiskFullAndCompleteFragments(_ container: String) async throws {
        let disk = try SmallDisk(size: "1m")
        defer { disk.unmount() }
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.vga640x480)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:back")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast
        settings.videoBitrate = 2_000_000
        movie.settings = settings
        movie.movieFragmentInterval = MediaTime(value: 1, timescale: 1)
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        let path = disk.path + "/movie." + container
        let spy = FinishSpy()
        movie.startRecording(to: path, recordingDelegate: spy)
        let deadline = Date().addingTimeInterval(120)
        while spy.calls.withLock({ $0.isEmpty }) && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        movie.stopRecording()
        session.stopRunning()
        try await Task.sleep(for: .milliseconds(200))
        let calls = spy.calls.withLock { $0 }
        try #require(calls.count == 1, "didFinishRecordingTo fired \(calls.count) times")
        let (summary, error) = calls[0]
        guard case .diskFull(let errorPath, let bytes, let seconds) = error else {
            Issue.record("expected diskFull, got \(String(describing: error))")
            return
        }
        #expect(errorPath == path)
        #expect(summary.stopReason == "diskFull")
        #expect(summary.fileIsUsable)
        #expect(summary.fileSize == bytes && bytes == size(path))
        #expect(summary.duration == seconds && seconds > 1)
        let decoded = try decodesToTheLastFrame(path)
        #expect(decoded.frames == summary.videoFrames, "decoded \(decoded.frames), summary says \(summary.videoFrames)")
    }

    @Test func assetWriterFailsWithDiskFullAndKeepsItsCompleteFragments() async throws {
        let disk = try SmallDisk(size: "1m")
        defer { disk.unmount() }
        let path = disk.path + "/written.mp4"
        let (session, videoOutput, audioOutput) = try AssetTestSupport.dataOutputSession()
        let writer = try AssetWriter(url: URL(fileURLWithPath: path), fileType: .mp4)
        writer.movieFragmentInterval = MediaTime(value: 1, timescale: 1)
        let videoInput = try AssetWriterInput(mediaType: .video, outputSettings: [
            VideoSettingsKey.codec: .string(VideoCodecType.h264),
            VideoSettingsKey.width: 640, VideoSettingsKey.height: 480,
            VideoSettingsKey.compressionProperties: [VideoSettingsKey.averageBitRate: 2_000_000],
        ])
        let audioInput = try AssetWriterInput(mediaType: .audio, outputSettings: [
            AudioSettingsKey.formatID: .string(AudioFormatID.mpeg4AAC), AudioSettingsKey.numberOfChannels: 1,
            AudioSettingsKey.sampleRate: 48_000,
        ])
        try writer.add(videoInput)
        try writer.add(audioInput)
        let feeder = AssetFeeder(video: videoInput, audio: audioInput, end: MediaTime(value: 120, timescale: 1))
        videoOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "video"))
        audioOutput.setSampleBufferDelegate(feeder, queue: DispatchQueue(label: "audio"))
        #expect(writer.startWriting())
        writer.startSession(atSourceTime: .zero)
        try await AssetTestSupport.run(session, writer, feeder, frames: 3600)
        #expect(writer.status == .failed)
        // The error is updated with what was kept once the file has been cut back.
        await AssetTestSupport.waitUntil(seconds: 10) {
            if case .diskFull(_, let bytes, _) = writer.error { return bytes == size(path) }
            return false
        }
        guard case .diskFull(let errorPath, let bytes, let seconds) = writer.error else {
            Issue.record("expected diskFull, got \(String(describing: writer.error))")
            return
        }
        #expect(errorPath == path && bytes == size(path))
        #expect(seconds > 1)
        let decoded = try decodesToTheLastFrame(path)
        #expect(abs(Double(decoded.frames) / 30 - seconds) < 0.05, "\(decoded.frames) frames for \(seconds) s")
    }

    @Test func wavRecorderKeepsEveryWholeSampleThatFitted() async throws {
        let disk = try SmallDisk(size: "256k")
        defer { disk.unmount() }
        let path = disk.path + "/voice.wav"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .wav, sampleRate: 48_000, channelCount: 2))
        #expect(recorder.record(forDuration: 10))
        await recorder.waitUntilFinished()
        guard case .diskFull(_, let bytes, let seconds) = recorder.error else {
            Issue.record("expected diskFull, got \(String(describing: recorder.error))")
            return
        }
        #expect(bytes == size(path))
        #expect(seconds > 1 && seconds < 1.4, "\(seconds) s of 48 kHz stereo in 256 KiB")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "ffmpeg: \(decode.stderr)")
        let duration = Double(try #require(TestSupport.probeStreams(path).first?["duration"] as? String)) ?? 0
        #expect(abs(duration - seconds) < 0.001)
    }

    /// An unfragmented MP4/MOV (`--fragment-interval 0`) is written in hidden fragments, so a full
    /// disk leaves its complete fragments playable, as for a fragmented one (it used to leave an
    /// mdat without an index, which nothing plays).
    @Test(arguments: ["mp4", "mov"])
    func anUnfragmentedMovieOnAFullDiskKeepsAPlayableFile(_ container: String) async throws {
        let disk = try SmallDisk(size: "2m")
        defer { disk.unmount() }
        let path = disk.path + "/plain." + container
        let result = try await offPool(CommandLineTests.binary, [
            "record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "60", "--size", "1280x720",
            "--pace", "virtual", "--preset", "ultrafast", "--bitrate", "4000000", "--fragment-interval", "0", path,
        ])
        #expect(result.status != 0, "exited 0: \(result.stdout)")
        #expect(result.stderr.contains("is full"), "\(result.stderr)")
        let kept = try #require(result.stderr.firstMatch(of: /kept ([0-9.]+) s in ([0-9]+) bytes/), "\(result.stderr)")
        let seconds = try #require(Double(kept.1))
        #expect(try #require(Int64(kept.2)) == size(path))
        // Hidden fragments are cut at the encoder's own keyframes (every 2 s): at most one lost.
        #expect(seconds > 50, "only \(seconds) s kept")
        let decoded = try decodesToTheLastFrame(path)
        #expect(abs(Double(decoded.frames) / 30 - seconds) < 0.05, "\(decoded.frames) frames for \(seconds) s")
    }

    @Test func anM4ARecorderOnAFullDiskKeepsItsCompleteFragments() async throws {
        let disk = try SmallDisk(size: "64k")
        defer { disk.unmount() }
        let path = disk.path + "/voice.m4a"
        let recorder = try AudioRecorder(path: path, settings: AudioRecorderSettings(format: .m4a, sampleRate: 48_000, channelCount: 1))
        #expect(recorder.record(forDuration: 30))
        await recorder.waitUntilFinished()
        guard case .diskFull(_, let bytes, let seconds) = recorder.error else {
            Issue.record("expected diskFull, got \(String(describing: recorder.error))")
            return
        }
        #expect(bytes == size(path))
        // 64 kbit/s in 64 KiB: about 8 s, less the fragment being written when the disk filled.
        #expect(seconds > 4, "\(seconds) s kept")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "ffmpeg: \(decode.stderr)")
        let duration = Double(try #require(TestSupport.probeStreams(path).first?["duration"] as? String)) ?? 0
        #expect(abs(duration - seconds) < 0.05, "ffprobe \(duration) s, the error says \(seconds) s")
    }

    @Test func aStillThatDoesNotFitIsATypedErrorAndLeavesNoFile() throws {
        let disk = try SmallDisk(size: "256k")
        defer { disk.unmount() }
        try disk.fill(leaving: 16_384)
        let path = disk.path + "/still.jpg"
        #expect(throws: CaptureError.diskFull(path: path)) { try OutputPath.write([UInt8](repeating: 0xAB, count: 100_000), to: path) }
        #expect(!FileManager.default.fileExists(atPath: path))
        try OutputPath.write([UInt8](repeating: 0xAB, count: 1000), to: path)
        #expect(throws: CaptureError.outputFileExists(path: path)) { try OutputPath.write([0], to: path) }
    }

    @Test func aFixtureThatDoesNotFitEndsWithDiskFull() async throws {
        let disk = try SmallDisk(size: "256k")
        defer { disk.unmount() }
        let path = disk.path + "/webcam.nut"
        do {
            _ = try await FixtureTestSupport.record(size: Dimensions(width: 640, height: 480), fps: 15, pixelFormat: .mjpeg,
                                                    seconds: 30, to: path)
            Issue.record("a 30 s MJPEG fixture fitted into 256 KiB")
        } catch let error as CaptureError {
            guard case .diskFull(let errorPath, _, _) = error else {
                Issue.record("expected diskFull, got \(error)")
                return
            }
            #expect(errorPath == path)
        }
    }
}

/// A write the OS refuses for another reason than space: a file-size limit (`prlimit --fsize`,
/// EFBIG). Needs no root. The CLI ignores SIGXFSZ, so the write fails instead of killing it.
@Suite(.timeLimit(.minutes(10))) struct WriteFailureTests {
    @Test func aFileSizeLimitEndsTheRecordingWithWriteFailedAndKeepsCompleteFragments() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let path = dir + "/limited.mp4"
        let result = try await offPool("prlimit", [
            "--fsize=1000000", CommandLineTests.binary,
            "record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "60", "--size", "1280x720",
            "--pace", "virtual", "--preset", "ultrafast", "--bitrate", "4000000", "--fragment-interval", "1", path,
        ])
        #expect(result.status == 1, "status \(result.status): \(result.stderr)")
        #expect(result.stderr.contains("File too large (errno 27)"), "\(result.stderr)")
        let kept = try #require(result.stderr.firstMatch(of: /kept ([0-9.]+) s in ([0-9]+) bytes/), "\(result.stderr)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(Int(kept.2) == size && size <= 1_000_000)
        // --json: what was kept, on stdout, for scripts.
        let again = dir + "/limited-json.mp4"
        let json = try TestSupport.run("prlimit", [
            "--fsize=1000000", CommandLineTests.binary,
            "record", "--camera", "sim:back", "--duration", "60", "--size", "1280x720", "--pace", "virtual",
            "--preset", "ultrafast", "--bitrate", "4000000", "--fragment-interval", "1", "--json", again,
        ])
        #expect(json.status == 1)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        #expect(object["stopReason"] as? String == "writeFailed" && object["errno"] as? Int == 27)
        #expect(object["fileIsUsable"] as? Bool == true)
        #expect(object["bytesKept"] as? Int == (try FileManager.default.attributesOfItem(atPath: again)[.size] as? Int))
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "ffmpeg: \(decode.stderr)")
        #expect((Double(kept.1) ?? 0) > 5)
    }
}
