import CaptureKit
import Foundation
import Testing

@Suite struct InspectCommandTests {
    static let recording = SharedRecording()

    @Test func aGoodFilePassesItsChecks() async throws {
        let path = try await Self.recording.path()
        let result = try await offPool(CommandLineTests.binary, ["inspect", path, "--expect-frames", "96", "--max-av-offset", "40ms"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("dropped: none"))
        #expect(result.stdout.contains("96 frames"))
        #expect(result.stdout.contains("check expect-frames: ok"))
        #expect(result.stdout.contains("check max-av-offset: ok"))
        #expect(result.stdout.contains("sync 1 s:") && result.stdout.contains("sync 3 s:"))

        let json = try await offPool(CommandLineTests.binary, ["inspect", path, "--json"])
        #expect(json.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(object["decodedVideoFrames"] as? Int == 96)
        #expect(object["hasMarkers"] as? Bool == true)
        let streams = try #require(object["streams"] as? [[String: Any]])
        #expect(streams.first?["maximumKeyframeInterval"] as? Int == 60)  // MovieFileOutput: a keyframe every 2 s
        // Asking for the wrong count fails.
        let wrong = try await offPool(CommandLineTests.binary, ["inspect", path, "--expect-frames", "95"])
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("96 frames, not 95"))
    }

    @Test func removedFramesAreNamedAndFailTheCheck() async throws {
        let path = try await Self.recording.path()
        let cut = (path as NSString).deletingLastPathComponent + "/cut.mp4"
        let ffmpeg = try await offPool("ffmpeg", ["-v", "error", "-y", "-i", path, "-vf", "select='not(between(n\\,40\\,44))',setpts=N/FRAME_RATE/TB",
                                                     "-c:v", "libx264", "-crf", "18", "-c:a", "copy", cut])
        #expect(ffmpeg.status == 0, "\(ffmpeg.stderr)")
        let result = try await offPool(CommandLineTests.binary, ["inspect", cut, "--expect-frames", "96"])
        #expect(result.status != 0)
        #expect(result.stdout.contains("dropped: 5 (indices 40–44)"), "\(result.stdout)")
        #expect(result.stderr.contains("missing frame indices 40–44"), "\(result.stderr)")
        let plain = try await offPool(CommandLineTests.binary, ["inspect", cut])
        #expect(plain.status == 0)  // no check asked for
    }

    @Test func contactSheetIsAJPEGShowingTheStamps() async throws {
        let path = try await Self.recording.path()
        let sheet = (path as NSString).deletingLastPathComponent + "/sheet.jpg"
        let result = try await offPool(CommandLineTests.binary, ["inspect", path, "--json", "--contact-sheet", sheet])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let thumbnails = try #require(object["thumbnails"] as? [[String: Any]])
        #expect(thumbnails.count == 12)
        let probe = try TestSupport.probeStreams(sheet)
        #expect(probe.first?["codec_name"] as? String == "mjpeg")
        let picture = try JPEGCodec().decode([UInt8](Data(contentsOf: URL(fileURLWithPath: sheet))))
        #expect(picture.format == .yuv420)
        var read: [Int] = []
        for t in thumbnails {
            let (x, y, w, h) = (t["x"] as! Int, t["y"] as! Int, t["width"] as! Int, t["height"] as! Int)
            let base = UnsafeRawBufferPointer(start: picture.baseAddress(ofPlane: 0) + y * picture.bytesPerRow[0] + x,
                                              count: (h - 1) * picture.bytesPerRow[0] + w)
            let index = FrameStampReader.frameIndex(in: LumaPlane(base: base, width: w, height: h, bytesPerRow: picture.bytesPerRow[0]))
            read.append(index.map(Int.init) ?? -1)
            #expect(t["stampIndex"] as? Int == index.map(Int.init))
        }
        // Evenly spaced over the 96 frames, first and last included.
        #expect(read == [0, 8, 17, 25, 34, 43, 51, 60, 69, 77, 86, 95], "stamps read back from the JPEG: \(read)")
        print("contact sheet stamps: \(read)")
    }
}

/// Runs a tool on a Dispatch thread so a long subprocess does not hold one of Swift
/// concurrency's few cooperative threads (other tests' timers run there).
func offPool(_ tool: String, _ arguments: [String]) async throws -> TestSupport.ToolResult {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(with: Result { try TestSupport.run(tool, arguments) })
        }
    }
}

/// Runs blocking work (decoding, ffprobe) on a Dispatch thread instead of a cooperative one.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
    }
}
