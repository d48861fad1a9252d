import CaptureKit
import Foundation
import Testing

/// One damaged MJPEG frame from a camera whose frames are encoded (H.264 into MP4) is left out
/// and counted with its reason, as when they are copied: the recording goes on and the file plays
/// with every other frame (it used to end the recording with `codecFailure` and a 152-byte file).
@Suite struct CorruptFrameEncodingTests {
    /// A 3 s virtual-pace recording of the MJPEG webcam (640x480 @ 30) with the microphone, frame
    /// 40 damaged as `kind`, encoded with `codec` into `path`.
    static func record(_ kind: FrameCorruption, at frame: Int64 = 40, codec: VideoCodec = .h264, fragmentInterval: MediaTime = .invalid,
                       to path: String) async throws -> RecordingSummary {
        let scenario = SimulatorScenario()
        scenario.faults = FaultTimeline([FaultEvent(at: .frame(frame), device: "sim:webcam", fault: .corruptFrame(kind))])
        let registry = CaptureKit.makeRegistry(seed: 3, scenario: scenario)
        let session = CaptureSession(pace: .virtual)
        try session.setSessionPreset(.inputPriority)
        let camera = try registry.device(uniqueID: "sim:webcam")
        let format = try require(camera.format(matching: Dimensions(width: 640, height: 480), frameRate: 30, pixelFormat: .mjpeg))
        try camera.lockForConfiguration()
        try camera.setActiveFormat(format)
        try camera.setActiveVideoMinFrameDuration(MediaTime(value: 1, timescale: 30))
        camera.unlockForConfiguration()
        try session.addInput(CaptureDeviceInput(device: camera))
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:mic")))
        let movie = MovieFileOutput()
        movie.settings.videoMode = .encode(codec)
        movie.settings.preset = .ultrafast
        movie.maxRecordedDuration = MediaTime(value: 3, timescale: 1)
        movie.movieFragmentInterval = fragmentInterval
        try session.addOutput(movie)
        try session.startRunning()
        defer { session.stopRunning() }
        return try await movie.record(to: path)
    }

    @Test(arguments: [FrameCorruption.truncated, .badMarker, .garbage])
    func theDamagedFrameIsLeftOutAndTheRecordingGoesOn(_ kind: FrameCorruption) async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/corrupt-\(kind).mp4"
        let summary = try await Self.record(kind, to: path)
        #expect(summary.stopReason == "maximumDuration")
        #expect(summary.fileIsUsable)
        #expect(summary.videoCodec == "h264" && !summary.videoPassthrough)
        // Reported: one frame left out, with when and why.
        #expect(summary.invalidFramesSkipped == 1)
        #expect(summary.videoFrames == 89)
        let problem = try #require(summary.invalidFrameProblem)
        #expect(problem.hasPrefix("frame at 1.333"), "\(problem)")
        switch kind {
        case .truncated: #expect(problem.contains("end-of-image marker"), "\(problem)")
        case .badMarker: #expect(problem.contains("start-of-image marker"), "\(problem)")
        case .garbage: #expect(problem.contains("could not decode"), "\(problem)")
        }

        // ffprobe counts all frames but the damaged one; ffmpeg decodes the file without a complaint;
        // the frame stamps say which one is missing.
        let count = try TestSupport.run("ffprobe", ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                                    "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0", path])
        #expect(count.status == 0)
        #expect(Int(count.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) == 89, "\(count.stdout)\(count.stderr)")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
        #expect(try TestSupport.analyze(path).droppedIndices == [40])
    }

    @Test func aKeyframeDueAtTheDamagedFrameGoesToTheNextOne() async throws {
        // One-second fragments start on forced keyframes at 1 s and 2 s; frame 30 (1.000 s) is damaged.
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/fragmented.mp4"
        let summary = try await Self.record(.truncated, at: 30, fragmentInterval: MediaTime(value: 1, timescale: 1), to: path)
        #expect(summary.invalidFramesSkipped == 1 && summary.videoFrames == 89)
        let packets = try TestSupport.run("ffprobe", ["-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time,flags",
                                                      "-of", "csv=p=0", path])
        #expect(packets.status == 0, "\(packets.stderr)")
        let keyframes = packets.stdout.split(separator: "\n").filter { $0.contains(",K") }
            .compactMap { Double($0.split(separator: ",")[0]) }.map { Int(($0 * 30).rounded()) }
        // Frame 31 (the file's 31st: the file starts at frame 0) takes the keyframe frame 30 was due.
        #expect(keyframes == [0, 31, 60], "keyframes at file frames \(keyframes)")
    }

    @Test func theToolSaysWhichFrameItLeftOutAndWhy() async throws {
        // `capture test` with a scenario (the encode twin of corrupt-truncated): exit 0, and the
        // movie it kept holds 89 of 90 frames.
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let scenario = ScenarioCommandTests.scenarios + "/corrupt-truncated-encoded.json"
        let result = try TestSupport.run(CommandLineTests.binary, ["test", scenario, "--artifacts", dir + "/artifacts", "--json", dir + "/report.json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: dir + "/report.json"))) as? [String: Any])
        let measured = try #require((report["results"] as? [[String: Any]])?.first?["measured"] as? [String: Any], "\(report)")
        #expect(measured["invalidFramesSkipped"] as? Int == 1, "\(measured)")
        #expect(measured["frames"] as? Int == 89, "\(measured)")
    }
}
