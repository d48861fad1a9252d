import CaptureKit
import Foundation
import Testing

/// MJPEG pass-through (`MovieFileOutput.VideoMode.passthrough`, `capture record --video-codec copy`):
/// the camera's JPEG frames go into MOV/MKV files untouched. Judged by what ffmpeg reads back: the
/// packets' bytes and times, the decoded frames' stamps, the streams ffprobe lists.
@Suite struct MJPEGPassthroughTests {
    struct Take {
        var summary: RecordingSummary
        /// The frames the camera delivered during the recording, as the movie output saw them.
        var delivered: [SampleCollector.Item]
        var dir: String
        var path: String
    }

    /// Records sim:webcam in one of its MJPEG formats (or `pixelFormat`) in virtual time, with a
    /// watching collector that sees the same sample buffers as the movie output.
    static func record(_ fileName: String, seconds: Double = 1, size: Dimensions = Dimensions(width: 640, height: 480),
                       pixelFormat: PixelFormat = .mjpeg, microphone: Bool = true,
                       registry: DeviceRegistry = CaptureKit.makeRegistry(seed: 5),
                       configure: (MovieFileOutput, CaptureConnection?) throws -> Void = { _, _ in }) async throws -> Take {
        let dir = try TestSupport.temporaryDirectory()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        let camera = try registry.device(uniqueID: "sim:webcam")
        let format = try require(camera.format(matching: size, frameRate: 30, pixelFormat: pixelFormat))
        try camera.lockForConfiguration()
        try camera.setActiveFormat(format)
        try camera.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 30))
        camera.unlockForConfiguration()
        try session.addInput(CaptureDeviceInput(device: camera))
        if microphone { try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic"))) }
        let collector = SampleCollector(drives: false)
        try session.addOutput(collector)
        let movie = MovieFileOutput()
        var settings = movie.settings
        settings.preset = .ultrafast
        movie.settings = settings
        movie.maxRecordedDuration = MediaTime(seconds: seconds, preferredTimescale: 1_000_000)
        try session.addOutput(movie)
        try configure(movie, movie.attachment.connections.first { $0.mediaType == .video })
        try session.startRunning()
        defer { session.stopRunning() }
        let path = dir + "/" + fileName
        let summary = try await movie.record(to: path)
        let video = collector.video
        let start = video.first?.presentationTime ?? .zero
        let delivered = video.filter { $0.presentationTime - start < movie.maxRecordedDuration }
        return Take(summary: summary, delivered: delivered, dir: dir, path: path)
    }

    /// The video packets as ffmpeg reads them without decoding: PTS (seconds, as stored: `-copyts`
    /// keeps ffmpeg from shifting them by the AAC priming) and Adler-32 of the bytes.
    static func packets(_ path: String) throws -> [(pts: Double, size: Int, adler: UInt32)] {
        let result = try TestSupport.run("ffmpeg", ["-v", "error", "-copyts", "-i", path, "-map", "0:v", "-c", "copy", "-f", "framecrc", "-"])
        #expect(result.status == 0, "\(result.stderr)")
        var timeBase = (num: 1.0, den: 1.0)
        var out: [(Double, Int, UInt32)] = []
        for line in result.stdout.split(separator: "\n") {
            if line.hasPrefix("#tb 0:") {
                let parts = line.dropFirst(6).trimmingCharacters(in: .whitespaces).split(separator: "/")
                timeBase = (Double(parts[0]) ?? 1, Double(parts[1]) ?? 1)
                continue
            }
            guard !line.hasPrefix("#") else { continue }
            let fields = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count >= 6, let pts = Double(fields[2]), let size = Int(fields[4]),
                  let adler = UInt32(fields[5].dropFirst(2), radix: 16) else { continue }
            out.append((pts * timeBase.num / timeBase.den, size, adler))
        }
        return out
    }

    /// Adler-32 as ffmpeg's framecrc muxer computes it (seeded with 0, not the standard 1).
    static func adler32(_ bytes: [UInt8]) -> UInt32 {
        var a: UInt32 = 0, b: UInt32 = 0
        for byte in bytes {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return b << 16 | a
    }

    @Test(arguments: ["mov", "mkv"])
    func mjpegCameraIsCopiedByteForByte(container: String) async throws {
        // The default (automatic) copies an MJPEG camera into MOV and MKV.
        let take = try await Self.record("copy." + container, seconds: 2)
        defer { try? FileManager.default.removeItem(atPath: take.dir) }
        #expect(take.summary.videoPassthrough)
        #expect(take.summary.videoCodec == "mjpeg")
        #expect(take.summary.videoFrames == 60)
        #expect(take.summary.audioSamples == 96_000)
        let streams = try TestSupport.probeStreams(take.path)
        #expect(streams.map { $0["codec_name"] as? String } == ["mjpeg", "aac"])
        #expect(streams.first?["width"] as? Int == 640 && streams.first?["height"] as? Int == 480)

        // Every packet is the camera's frame, byte for byte, at n / 30 s: exactly in MOV; in MKV to
        // the millisecond it stores (the AAC priming packet is left out there, so nothing shifts).
        let packets = try Self.packets(take.path)
        #expect(take.delivered.count == 60)
        #expect(packets.count == 60)
        let (origin, tolerance) = container == "mkv" ? (0.0, 0.0005) : (0.0, 1e-9)
        for (n, (packet, frame)) in zip(packets, take.delivered).enumerated() {
            #expect(abs(packet.pts - origin - Double(n) / 30) <= tolerance, "packet \(n) at \(packet.pts) s")
            #expect(packet.size == frame.bytes.count && packet.adler == Self.adler32(frame.bytes), "packet \(n) differs from the camera's frame")
        }
        // Decoded, the frames still carry the simulator's stamps, and the sync markers line up.
        let report = try TestSupport.analyze(take.path)
        #expect(report.frameIndices.compactMap { $0 } == Array(0..<60))
        #expect(report.isClean)
        #expect(report.syncMarkers.map(\.second) == [1])
        for marker in report.syncMarkers {
            let offset = try #require(marker.offset, "marker \(marker.second) lacks a side: \(marker)")
            #expect(abs(offset) <= 0.002, "A/V offset at \(marker.second) s is \(offset) s")
        }
        let frequency = try #require(report.dominantFrequency)
        #expect(abs(frequency - 1000) < 20)
    }

    @Test func aFixtureWithJitterAndADropIsCopiedWithItsOwnTimestamps() async throws {
        // The shipped fixture: a device's MJPEG bytes, frame 10 lost, PTS jittered by up to ±400 µs.
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "fixture:" + ShippedFixtureTests.path)))
        let collector = SampleCollector(drives: false)
        try session.addOutput(collector)
        let movie = MovieFileOutput()
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/fixture.mov"
        let summary = try await movie.record(to: path)
        #expect(summary.videoPassthrough && summary.videoFrames == 30)
        // Each packet keeps the device's own time (jitter included, to the track's 1/90000 s
        // tick; the lost frame stays a gap) and holds the device's bytes.
        let packets = try Self.packets(path)
        let delivered = collector.video
        #expect(packets.map { Int(($0.pts * 30).rounded()) } == Array(0...9) + Array(11...30))
        let recorded = try #require(try FixtureReader.read(path: ShippedFixtureTests.path).samples.first)
        let origin = try #require(recorded.first).presentationTime
        let worst = zip(packets, recorded).map { abs($0.pts - ($1.presentationTime - origin).seconds) }.max() ?? .infinity
        #expect(packets.count == recorded.count && worst <= 0.5 / 90_000 + 1e-9, "largest PTS difference \(worst * 1e6) µs")
        #expect(packets.contains { abs($0.pts * 30 - ($0.pts * 30).rounded()) > 1e-4 }, "the jitter is in the file")
        #expect(packets.map(\.adler) == delivered.map { Self.adler32($0.bytes) })
        let report = try TestSupport.analyze(path)
        #expect(report.frameIndices.compactMap { $0 } == Array(0...9) + Array(11...30))
        #expect(report.droppedIndices == [10])
    }

    @Test func realTimeCopyGoesThroughTheWriterQueueUntouched() async throws {
        // Real time: frames reach the file through the output's writer queue (by reference, or as
        // a copy of just their bytes if the queue backs up); either way the bytes must not change.
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .realtime)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "fixture:" + ShippedFixtureTests.path)))
        let collector = SampleCollector(drives: false)
        try session.addOutput(collector)
        let movie = MovieFileOutput()
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/realtime.mkv"
        let summary = try await movie.record(to: path)
        #expect(summary.videoPassthrough)
        let delivered = collector.video
        let packets = try Self.packets(path)
        // The session runs before the recording starts, so on a busy machine the first frames can
        // reach the watching output only: the file holds the delivered frames from its start on.
        #expect(packets.count == summary.videoFrames && packets.count <= delivered.count && packets.count >= 20)
        #expect(packets.map(\.adler) == delivered.suffix(packets.count).map { Self.adler32($0.bytes) })
    }

    @Test func mp4AndRawCamerasAreEncodedByDefault() async throws {
        let mp4 = try await Self.record("auto.mp4", microphone: false)
        defer { try? FileManager.default.removeItem(atPath: mp4.dir) }
        #expect(!mp4.summary.videoPassthrough && mp4.summary.videoCodec == "h264")
        #expect(try TestSupport.probeStreams(mp4.path).map { $0["codec_name"] as? String } == ["h264"])
        #expect(try TestSupport.analyze(mp4.path).frameIndices.compactMap { $0 } == Array(0..<30))

        let yuyv = try await Self.record("raw.mov", pixelFormat: .yuyv, microphone: false)
        defer { try? FileManager.default.removeItem(atPath: yuyv.dir) }
        #expect(!yuyv.summary.videoPassthrough && yuyv.summary.videoCodec == "h264")

        // Asking for an encoder encodes, even from an MJPEG camera into MOV.
        let encoded = try await Self.record("encoded.mov", microphone: false) { movie, _ in movie.settings.codec = .h264 }
        defer { try? FileManager.default.removeItem(atPath: encoded.dir) }
        #expect(!encoded.summary.videoPassthrough && encoded.summary.videoCodec == "h264")
        #expect(try TestSupport.probeStreams(encoded.path).map { $0["codec_name"] as? String } == ["h264"])
    }

    @Test func copyingARawCameraOrIntoMP4FailsWithATypedError() async throws {
        await #expect {
            _ = try await Self.record("raw.mov", pixelFormat: .yuyv, microphone: false) { movie, _ in movie.settings.videoMode = .passthrough }
        } throws: { error in
            guard case .passthroughUnavailable(let why) = error as? CaptureError else { return false }
            return why.contains("YUYV") && why.contains("MJPG")
        }
        await #expect {
            _ = try await Self.record("copy.mp4", microphone: false) { movie, _ in movie.settings.videoMode = .passthrough }
        } throws: { error in
            guard case .passthroughUnavailable(let why) = error as? CaptureError else { return false }
            return why.contains("MOV or MKV")
        }
    }

    @Test func rotationFragmentsAndDurationLimitKeepWorkingWithCopy() async throws {
        let take = try await Self.record("rotated.mov", seconds: 1.5) { movie, video in
            movie.movieFragmentInterval = MediaTime(value: 1, timescale: 2)
            try video?.setVideoRotationAngle(90)
            try video?.setVideoMirrored(true)
        }
        defer { try? FileManager.default.removeItem(atPath: take.dir) }
        #expect(take.summary.videoPassthrough && take.summary.videoFrames == 45)
        #expect(take.summary.stopReason == "maximumDuration")
        let probe = try TestSupport.run("ffprobe", ["-v", "error", "-show_streams", "-of", "json", take.path])
        #expect(probe.stdout.contains("Display Matrix"), "\(probe.stdout)")
        // Fragmented while recording (a first tiny fragment, then one every 0.5 s), then defragmented.
        #expect(take.summary.fragmentsWritten >= 3, "\(take.summary.fragmentsWritten) fragments")
        let data = try Data(contentsOf: URL(fileURLWithPath: take.path))
        #expect(data.ranges(of: Data("moof".utf8)).isEmpty, "a finished movie is one moov, no fragments")
        #expect(try Self.packets(take.path).count == 45)
        #expect(try TestSupport.analyze(take.path).frameIndices.compactMap { $0 } == Array(0..<45))

        // Matroska has no display matrix here: rotation is refused rather than lost.
        await #expect {
            _ = try await Self.record("rotated.mkv", microphone: false) { _, video in try video?.setVideoRotationAngle(90) }
        } throws: { error in
            guard case .invalidArgument(let why) = error as? CaptureError else { return false }
            return why.contains("Matroska")
        }
    }

    @Test(arguments: ["mov", "mkv"])
    func fileSizeLimitStopsACopiedRecordingWithAUsableFile(container: String) async throws {
        let take = try await Self.record("size." + container, seconds: 10, size: Dimensions(width: 1280, height: 720)) { movie, _ in
            movie.maxRecordedFileSize = 1_500_000
        }
        defer { try? FileManager.default.removeItem(atPath: take.dir) }
        #expect(take.summary.stopReason == "maximumFileSize" && take.summary.fileIsUsable)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: take.path)[.size] as? Int)
        #expect(size <= 1_500_000 && size > 1_000_000, "file is \(size) bytes")
        let frames = take.summary.videoFrames
        #expect(try Self.packets(take.path).count == frames)
        #expect(try TestSupport.analyze(take.path).frameIndices.compactMap { $0 } == Array(0..<frames))
    }

    /// A compressor that damages chosen frames after compressing them properly.
    final class DamagingCompressor: FrameCompressor {
        let inner = JPEGFrameCompressor()
        let calls = Locked(0)
        /// Frame index → damage: "truncate" cuts the end (no EOI), "garbage" overwrites the SOI.
        let damage: [Int: String]
        init(damage: [Int: String]) { self.damage = damage }

        func compress(_ frame: PixelBuffer, into output: PixelBuffer) throws(CaptureError) {
            try inner.compress(frame, into: output)
            let index = calls.withLock { n in defer { n += 1 }; return n }
            guard let kind = damage[index] else { return }
            var bytes = output.withCompressedData { Array($0) }
            if kind == "truncate" { bytes.removeLast(bytes.count / 3) } else { bytes[0] = 0x00; bytes[1] = 0x11 }
            let stored: Result<Void, CaptureError> = bytes.withUnsafeBytes { raw in
                do throws(CaptureError) { return .success(try output.setCompressedData(raw)) } catch { return .failure(error) }
            }
            try stored.get()
        }
    }

    @Test func damagedFramesAreLeftOutAndReported() async throws {
        let compressor = DamagingCompressor(damage: [0: "garbage", 7: "truncate", 12: "garbage"])
        let registry = DeviceRegistry(drivers: [SimulatorDriver(seed: 5, compressor: compressor)])
        let take = try await Self.record("damaged.mkv", microphone: false, registry: registry)
        defer { try? FileManager.default.removeItem(atPath: take.dir) }
        // Frame 0 is damaged: the recording starts with frame 1; 7 and 12 are left out.
        #expect(take.summary.videoPassthrough)
        #expect(take.summary.invalidFramesSkipped == 3)
        #expect(take.summary.invalidFrameProblem?.contains("start-of-image") == true, "\(take.summary.invalidFrameProblem ?? "nil")")
        let expected = Array(1...30).filter { $0 != 7 && $0 != 12 }
        #expect(take.summary.videoFrames == expected.count)
        let report = try TestSupport.analyze(take.path)
        #expect(report.frameIndices.compactMap { $0 } == expected)
        // The frames around a gap keep their own times: frame n at (n − 1) / 30 s from the file's start.
        let packets = try Self.packets(take.path)
        #expect(packets.map { Int(($0.pts * 30).rounded()) } == expected.map { $0 - 1 })

        // MovieWriter itself refuses a non-JPEG and writes nothing.
        let writer = try MovieWriter(path: take.dir + "/direct.mov", container: .mov, video: nil,
                                     videoPassthrough: VideoPassthroughSettings(dimensions: Dimensions(width: 16, height: 16),
                                                                                frameDuration: MediaTime(value: 1, timescale: 30)),
                                     audio: nil)
        let notJPEG = PixelBuffer(format: .mjpeg, width: 16, height: 16)
        try [UInt8](repeating: 7, count: 100).withUnsafeBytes { raw in try notJPEG.setCompressedData(raw) }
        #expect(throws: CaptureError.self) { try writer.appendCompressedVideo(notJPEG, frameIndex: 0) }
        #expect(writer.videoFramesWritten == 0)
        try writer.finish()
    }

    @Test func commandLineCopiesAndSaysSo() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/cli.mkv"
        let result = try TestSupport.run(CommandLineTests.binary, [
            "record", "--camera", "sim:webcam", "--microphone", "sim:mic", "--format", "640x480@30:MJPG", "--duration", "1",
            "--pace", "virtual", "--video-codec", "copy", "--container", "mkv", "--json", path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(summary["video"] as? String == "mjpeg (copied from camera)")
        let recording = try #require(summary["recording"] as? [String: Any])
        #expect(recording["videoPassthrough"] as? Bool == true && recording["videoFrames"] as? Int == 30)
        let file = try #require(summary["file"] as? [String: Any])
        #expect((file["streams"] as? [[String: Any]])?.map { $0["codec"] as? String } == ["mjpeg", "aac"])

        let human = try TestSupport.run(CommandLineTests.binary, [
            "record", "--camera", "sim:webcam", "--format", "640x480@30:MJPG", "--duration", "1", "--pace", "virtual",
            "--video-codec", "h264", dir + "/cli.mov",
        ])
        #expect(human.status == 0, "\(human.stderr)")
        #expect(human.stdout.contains("video: h264 (encoded)"), "\(human.stdout)")

        let refused = try TestSupport.run(CommandLineTests.binary, [
            "record", "--camera", "sim:back", "--duration", "1", "--pace", "virtual", "--video-codec", "copy", dir + "/raw.mov",
        ])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("only compressed (MJPEG) frames can be copied"), "\(refused.stderr)")

        let help = try TestSupport.run(CommandLineTests.binary, ["record", "--help"])
        #expect(help.stdout.contains("copy") && help.stdout.contains("mkv"))
    }
}
