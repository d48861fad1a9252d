import CaptureKit
import Foundation
import Testing

/// `capture record --control-at SECONDS:KEY=VALUE`, run through the binary.
@Suite struct ControlTimelineCommandTests {
    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func frameRateChangeMidRecordingContinuesTheFile() throws {
        let path = try TestSupport.temporaryDirectory() + "/control-at.mp4"
        let result = try TestSupport.run(CommandLineTests.binary, [
            "record", "--camera", "sim:back", "--duration", "2", "--format", "1280x720@30:420v", "--pace", "virtual",
            "--preset", "ultrafast", "--control-at", "1:frameRate=240", "--control-at", "0.5:zoom.factor=2", "--json", path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try Self.json(result.stdout)
        let recording = try #require(summary["recording"] as? [String: Any])
        #expect(recording["stopReason"] as? String == "duration")
        let changes = try #require(summary["controlTimeline"] as? [[String: Any]])
        #expect(changes.map { $0["change"] as? String } == ["zoom.factor=2", "frameRate=240"])
        #expect(changes.allSatisfy { $0["error"] == nil })
        let switchAt = try #require(changes[1]["mediaTime"] as? Double)
        // Applied when the frame at 1 s is delivered: the next frame boundary, one frame later
        // at most (the pump holds one frame ahead).
        #expect(switchAt > 1 && switchAt <= 1 + 2.0 / 30 + 1e-6, "frame rate changed at \(switchAt) s")
        let times = try LiveReconfigurationTests.videoPacketTimes(path)
        let origin = try #require(times.first)
        var slow = 0, fast = 0
        for (a, b) in zip(times, times.dropFirst()) {
            if b - origin <= switchAt + 1e-4 {
                #expect(abs(b - a - 1.0 / 30) < 2e-4); slow += 1
            } else {
                #expect(abs(b - a - 1.0 / 240) < 2e-4); fast += 1
            }
        }
        #expect(slow >= 30 && fast >= 200)
        // Every frame kept, in order.
        let stamps = try LiveReconfigurationTests.decodedStamps(path)
        #expect(stamps.map(\.index) == (0..<UInt32(stamps.count)).map { Optional($0) })
        #expect(recording["videoFrames"] as? Int == stamps.count)
        print("--control-at: frameRate=240 at \(switchAt) s; \(slow) gaps of 1/30, \(fast) of 1/240, \(stamps.count) frames")
    }

    @Test func sizeChangeEndsTheFileWithConfigurationChanged() throws {
        let path = try TestSupport.temporaryDirectory() + "/control-at-size.mov"
        let result = try TestSupport.run(CommandLineTests.binary, [
            "record", "--camera", "sim:back", "--duration", "2", "--format", "1280x720@30:420v", "--pace", "virtual",
            "--preset", "ultrafast", "--control-at", "0.5:format=640x480@30:420v", "--json", path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try Self.json(result.stdout)
        let recording = try #require(summary["recording"] as? [String: Any])
        #expect(recording["stopReason"] as? String == "configurationChanged")
        #expect(recording["fileIsUsable"] as? Bool == true)
        let stamps = try LiveReconfigurationTests.decodedStamps(path)
        #expect(stamps.count >= 15 && stamps.count <= 17 && stamps.allSatisfy { $0.width == 1280 })
        #expect(stamps.map(\.index) == (0..<UInt32(stamps.count)).map { Optional($0) })
    }

    @Test func badEntriesFailWithAMessage() throws {
        let dir = try TestSupport.temporaryDirectory()
        for (entry, message) in [("abc", "SECONDS:KEY=VALUE"), ("1:nope=3", "unknown control"), ("1:format=12x", "format must look like")] {
            let result = try TestSupport.run(CommandLineTests.binary, [
                "record", "--camera", "sim:back", "--duration", "1", "--pace", "virtual", "--control-at", entry, dir + "/x.mp4",
            ])
            #expect(result.status != 0)
            #expect(result.stderr.contains(message), "\(entry): \(result.stderr)")
        }
        // A value the device refuses when it applies: the change is skipped and named, the file finishes.
        let result = try TestSupport.run(CommandLineTests.binary, [
            "record", "--camera", "sim:back", "--duration", "1", "--pace", "virtual", "--preset", "ultrafast",
            "--control-at", "0.2:frameRate=500", "--json", dir + "/y.mp4",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let changes = try #require(try Self.json(result.stdout)["controlTimeline"] as? [[String: Any]])
        #expect((changes.first?["error"] as? String)?.contains("frameRate") == true)
    }
}
