import CaptureKit
import Foundation
import Testing

/// The fixture recorded from real kernel drivers in the VM (ci/vm/record-vivid-fixture): vivid's
/// camera (YUYV 320x180 at 30 fps) and snd-aloop's capture side while aplay played the sync tone
/// (1 kHz, −12 dBFS peak, a 50 ms 3 kHz burst every whole second of the player's file). In the
/// same session the VM recorded a movie; the golden file holds ffmpeg's framemd5 of it. Replayed
/// on this host (no VM) into a movie with the same settings, the decoded frames must be the same.
/// Serialized, and the fixture read once: these tests decode FFV1 and encode H.264 in a debug
/// build, and the suite shares two cores with wall-clock-sensitive tests (CrashSafetyTests).
@Suite(.serialized) struct VividFixtureTests {
    static let name = "vivid-yuyv-320x180-30"
    static var folder: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures")
    }
    static var path: String { folder.appendingPathComponent(name + ".nut").path }
    static let read = Result { () throws(CaptureError) -> FixtureContents in try FixtureReader.read(path: path) }

    struct Golden {
        var duration: Int
        var video: [String]
        var audio: [String]
    }

    static func golden() throws -> Golden {
        let text = try String(contentsOf: folder.appendingPathComponent(name + ".framemd5"), encoding: .utf8)
        let lines = text.split(separator: "\n").map(String.init)
        let duration = try #require(lines.first { $0.hasPrefix("# duration: ") }.flatMap { Int($0.dropFirst("# duration: ".count)) })
        return Golden(duration: duration,
                      video: lines.filter { $0.hasPrefix("video ") }.map { String($0.dropFirst(6)) },
                      audio: lines.filter { $0.hasPrefix("audio ") }.map { String($0.dropFirst(6)) })
    }

    static func framemd5(_ path: String, _ stream: String) throws -> [String] {
        let r = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-map", "0:\(stream)", "-f", "framemd5", "-"])
        #expect(r.status == 0, "\(r.stderr)")
        return r.stdout.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }

    /// Replays the fixture (camera and microphone) into a movie made as `capture fixture record --movie` makes it.
    static func replayIntoMovie(fixture: String = path, duration: Double, to path: String) async throws -> RecordingSummary {
        let registry = CaptureKit.makeRegistry()
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "fixture:\(fixture)#camera")))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "fixture:\(fixture)#microphone")))
        let movie = MovieFileOutput()
        var settings = MovieFileOutput.Settings()
        settings.preset = .ultrafast  // FixtureRecordCommand.movieSettings
        movie.settings = settings
        movie.maxRecordedDuration = MediaTime(seconds: duration, preferredTimescale: 1_000_000)
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        return try await movie.record(to: path)
    }

    @Test func theFixtureIsSmallAndHoldsRealDevices() throws {
        let size = try #require(try FileManager.default.attributesOfItem(atPath: Self.path)[.size] as? Int)
        #expect(size < 2_000_000)
        let contents = try Self.read.get()
        #expect(contents.version == 2)
        #expect(contents.devices.map(\.description.mediaType) == [.video, .audio])
        #expect(contents.devices[0].activeFormat.formatDescription == .video(pixelFormat: .yuyv, dimensions: Dimensions(width: 320, height: 180)))
        #expect(contents.devices[0].frameDuration == MediaTime(value: 1, timescale: 30))
        #expect(contents.devices[0].description.localizedName.lowercased().contains("vivid"))
        #expect(contents.devices[1].description.uniqueID == "hw:Loopback,1,0")
        #expect(contents.devices[1].activeFormat.formatDescription == .audio(AudioStreamFormat(sampleRate: 48_000, channelCount: 1, sampleFormat: .int16)))
        let codec = try TestSupport.run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "stream=codec_name",
                                                    "-of", "csv=p=0", Self.path])
        #expect(codec.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ffv1")
    }

    /// (a) The decoded frames equal the VM's original recording; their timestamps are the recorded ones.
    @Test func replayOnTheHostGivesTheFramesRecordedInTheVM() async throws {
        let golden = try Self.golden()
        let contents = try Self.read.get()
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let summary = try await Self.replayIntoMovie(duration: Double(golden.duration), to: dir + "/replay.mp4")
        let video = try Self.framemd5(dir + "/replay.mp4", "v")
        #expect(!golden.video.isEmpty && summary.videoFrames == golden.video.count)
        #expect(video == golden.video)
        // The movie's frame PTS are the recorded ones relative to the first frame, vivid's jitter
        // and gaps included, to the track's 1/90000 s tick.
        let recorded = contents.samples[0]
        let origin = try #require(recorded.first).presentationTime
        let expected = recorded.prefix(golden.video.count).map { ($0.presentationTime - origin).seconds }
        let decoded = try ShippedFixtureTests.decodedVideoPTS(dir + "/replay.mp4")
        let start = try #require(decoded.first)
        #expect(decoded.count == expected.count)
        let worst = zip(decoded, expected).map { abs(($0 - start) - $1) }.max() ?? .infinity
        #expect(worst <= 0.5 / 90_000 + 1e-9, "largest PTS difference \(worst * 1e6) µs")
    }

    /// (b) Replay delivers the recorded relative PTS, sequence numbers and drops exactly.
    @Test func replayDeliversTheRecordedTimesAndSequence() async throws {
        let contents = try Self.read.get()
        let replay = try await FixtureTestSupport.replay(["fixture:\(Self.path)#camera", "fixture:\(Self.path)#microphone"])
        for (device, media) in [(0, MediaType.video), (1, .audio)] {
            let recorded = contents.samples[device]
            let delivered = replay.items.withLock { $0 }.filter { $0.mediaType == media }
            #expect(delivered.count == recorded.count)
            let origin = contents.origin
            let replayOrigin = try #require(replay.items.withLock { $0.first }).presentationTime
            #expect(delivered.map { $0.presentationTime - replayOrigin } == recorded.map { $0.presentationTime - origin })
            #expect(delivered.map(\.sequenceNumber) == recorded.map(\.sequenceNumber))
            #expect(delivered.map(\.discontinuity) == recorded.map(\.discontinuity))
            #expect(delivered.map(\.bytes) == recorded.map(\.data))
        }
        // A real camera's clock: steps are whole frames give or take the driver's jitter (under one
        // frame: up to ~24 ms seen under TCG), and the sequence numbers say whether vivid lost any
        // (gaps would be in the file, not hidden).
        let frames = contents.samples[0]
        let steps = zip(frames.dropFirst(), frames).map { ($0.presentationTime - $1.presentationTime).seconds }
        let counted = zip(frames.dropFirst(), frames).map { Double($0.sequenceNumber - $1.sequenceNumber) / 30 }
        for (step, expected) in zip(steps, counted) { #expect(abs(step - expected) < 1.0 / 30, "step \(step) s for \(expected) s of frames") }
    }

    /// (c) The movie's audio is the loopback's tone, and its 3 kHz bursts sit where the fixture has them.
    @Test func replayedAudioIsTheToneAtTheRecordedTimes() async throws {
        let golden = try Self.golden()
        let contents = try Self.read.get()
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try await Self.replayIntoMovie(duration: Double(golden.duration), to: dir + "/replay.mp4")
        #expect(try Self.framemd5(dir + "/replay.mp4", "a") == golden.audio)
        var samples: [Float] = []
        var start: Double?
        try MediaFileReader(path: dir + "/replay.mp4").decode(video: nil, audio: { s, channels, _, t in
            if start == nil { start = t }
            samples += channels == 1 ? s : stride(from: 0, to: s.count, by: channels).map { s[$0] }
        })
        #expect(Double(samples.count) > 48_000 * (Double(golden.duration) - 0.1))
        let frequency = try #require(ToneAnalysis.dominantFrequency(samples: Array(samples[(samples.count / 4)..<(samples.count * 3 / 4)]),
                                                                    sampleRate: 48_000))
        #expect(abs(frequency - 1000) < 15)
        let inMovie = ToneAnalysis.burstOnsets(samples: samples, sampleRate: 48_000, startTime: start ?? 0)

        // The same bursts in the fixture's own PCM, on the movie's time line (0 = first video frame).
        let firstFrame = try #require(contents.samples[0].first).presentationTime
        var pcm: [Float] = []
        let audio = contents.samples[1]
        for buffer in audio {
            buffer.data.withUnsafeBytes { raw in
                for v in raw.bindMemory(to: Int16.self) { pcm.append(Float(Int16(littleEndian: v)) / 32768) }
            }
        }
        let pcmStart = (try #require(audio.first).presentationTime - firstFrame).seconds
        let inFixture = ToneAnalysis.burstOnsets(samples: pcm, sampleRate: 48_000, startTime: pcmStart)
            .filter { $0 >= 0.01 && $0 < Double(golden.duration) - 0.06 }
        #expect(inFixture.count >= golden.duration - 1)
        #expect(zip(inFixture.dropFirst(), inFixture).allSatisfy { abs($0 - $1 - 1) < 0.002 }, "\(inFixture)")
        #expect(inMovie.count == inFixture.count, "movie \(inMovie), fixture \(inFixture)")
        for (a, b) in zip(inMovie, inFixture) { #expect(abs(a - b) < 0.002, "movie \(a) s, fixture \(b) s") }
    }

    /// What the VM script relies on, checked on the host with the simulator: `--movie` records the
    /// movie a replay of the fixture reproduces frame for frame and sample for sample.
    @Test func fixtureRecordMovieIsWhatAReplayMakes() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try TestSupport.run(CommandLineTests.binary, [
            "fixture", "record", "--camera", "sim:webcam", "--microphone", "sim:mic", "--format", "640x480@30:YUYV",
            "--duration", "0.5", "--pace", "virtual", "--movie", dir + "/original.mp4", "--json", dir + "/take.nut"])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect((summary["movie"] as? [String: Any])?["videoFrames"] as? Int == 15)
        #expect(((summary["fixture"] as? [String: Any])?["buffers"] as? [Int])?.first == 30)  // 0.5 s more
        _ = try await Self.replayIntoMovie(fixture: dir + "/take.nut", duration: 0.5, to: dir + "/replay.mp4")
        for stream in ["v", "a"] {
            let original = try Self.framemd5(dir + "/original.mp4", stream)
            let replayed = try Self.framemd5(dir + "/replay.mp4", stream)
            #expect(!original.isEmpty && original == replayed)
        }
    }

    @Test func infoDescribesTheVividFixture() throws {
        let result = try TestSupport.run(CommandLineTests.binary, ["fixture", "info", "--json", Self.path])
        #expect(result.status == 0, "\(result.stderr)")
        let info = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        #expect(info["version"] as? Int == 2)
        let devices = try #require(info["devices"] as? [[String: Any]])
        let contents = try Self.read.get()
        #expect(devices.count == 2)
        #expect(devices.map { $0["buffers"] as? Int } == contents.samples.map(\.count))
        #expect(devices[0]["activeFormat"] as? String == "video YUYV 320x180")
        #expect(devices[1]["uniqueID"] as? String == "hw:Loopback,1,0")
        #expect(devices[0]["bytes"] as? Int == contents.samples[0].count * 320 * 180 * 2)
        // vivid's lost frames show as gaps in its sequence numbers; info counts them.
        let sequence = contents.samples[0].map(\.sequenceNumber)
        #expect(devices[0]["sequenceGaps"] as? Int == Int(sequence.last! - sequence.first!) + 1 - sequence.count)
    }
}
