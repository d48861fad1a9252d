import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// The smaller careless inputs of issue 39 (class 6): valid JSON numbers, a file-size limit below
/// any movie, a photo named like another format, a microphone given as the camera, control bytes in
/// a QR payload, and the messages for a bitrate in kbit/s, a negative duration and an empty name.
@Suite struct CarelessInputTests {
    static func capture(_ arguments: [String]) throws -> TestSupport.ToolResult {
        try TestSupport.run(CommandLineTests.binary, arguments)
    }

    static func scenarioJSON(duration: String = "1", seed: String = "0", name: String? = nil) -> String {
        #"{"version": 1, \#(name.map { #""name": \#($0), "# } ?? "")"duration": \#(duration), "seed": \#(seed), "#
            + #""devices": {"camera": {"device": "sim:back"}}, "expectations": {"frames": {"min": 1}}}"#
    }

    /// Every valid JSON number is read as the number it is: a decimal a double cannot hold exactly
    /// (Foundation gives an NSDecimalNumber) and 2⁵³−1 and 2⁶⁴−1 (integers) — in scenarios and profiles.
    @Test func validJSONNumbersAreAccepted() throws {
        let a = try Scenario.parse(Data(Self.scenarioJSON(duration: "0.30000000000000004").utf8), file: "a.json")
        #expect(a.duration == 0.30000000000000004)
        let b = try Scenario.parse(Data(Self.scenarioJSON(seed: "9007199254740991").utf8), file: "b.json")
        #expect(b.seed == 9_007_199_254_740_991)
        let c = try Scenario.parse(Data(Self.scenarioJSON(seed: "18446744073709551615").utf8), file: "c.json")
        #expect(c.seed == UInt64.max)
        let d = try Scenario.parse(Data(Self.scenarioJSON(seed: "1e3").utf8), file: "d.json")
        #expect(d.seed == 1000)
        // Wrong values keep messages that say what is wrong.
        for (seed, message) in [("true", "not a boolean"), ("1.5", "not 1.5"), ("-1", "not -1"), ("18446744073709551616", "from 0 to 18446744073709551615")] {
            do {
                _ = try Scenario.parse(Data(Self.scenarioJSON(seed: seed).utf8), file: "e.json")
                Issue.record("seed \(seed) accepted")
            } catch {
                #expect("\(error)".contains("field 'seed'") && "\(error)".contains(message), "\(seed): \(error)")
            }
        }
        do {
            _ = try Scenario.parse(Data(Self.scenarioJSON(duration: "false").utf8), file: "f.json")
            Issue.record("a boolean duration accepted")
        } catch {
            #expect("\(error)".contains("must be a number, not a boolean"), "\(error)")
        }
        // The same through the real tool: the scenario runs.
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Self.scenarioJSON(duration: "0.30000000000000004", seed: "9007199254740991").write(toFile: "\(dir)/n.json", atomically: true, encoding: .utf8)
        let run = try Self.capture(["test", "\(dir)/n.json"])
        #expect(run.status == 0, "\(run.stdout) \(run.stderr)")
        // A device profile with such a decimal.
        let mic = try String(contentsOfFile: Self.profilePath("4-mic.json"), encoding: .utf8)
            .replacingOccurrences(of: "\"burstDuration\": 0.05", with: "\"burstDuration\": 0.30000000000000004")
        #expect(mic.contains("0.30000000000000004"))
        _ = try SimulatedDeviceProfile.parse(Data(mic.utf8), file: "mic.json")
    }

    static func profilePath(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Simulator/Profiles/\(name)").path
    }

    @Test func anEmptyScenarioNameSaysSo() throws {
        do {
            _ = try Scenario.parse(Data(Self.scenarioJSON(name: "\"\"").utf8), file: "g.json")
            Issue.record("an empty name accepted")
        } catch {
            #expect("\(error)".contains("field 'name': must not be empty"), "\(error)")
        }
    }

    /// A limit no movie can keep is refused up front; the smallest one taken is kept.
    @Test func aFileSizeLimitBelowAnyMovieIsRefused() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tiny = try Self.capture(["record", "--camera", "sim:back", "--duration", "1", "--pace", "virtual", "--max-file-size", "1", "\(dir)/a.mp4"])
        #expect(tiny.status == 64 && tiny.stderr.contains("--max-file-size must be at least 65536 bytes, not 1"), "\(tiny.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/a.mp4"))
        let smallest = try Self.capture(["record", "--camera", "sim:back", "--duration", "5", "--pace", "virtual", "--preset", "ultrafast",
                                         "--max-file-size", "65536", "--json", "\(dir)/b.mp4"])
        #expect(smallest.status == 0, "\(smallest.stderr)")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: "\(dir)/b.mp4")[.size] as? Int)
        #expect(size <= 65536 && smallest.stdout.contains("\"stopReason\" : \"maximumFileSize\""), "\(size) bytes")
    }

    /// `photo` writes a JPEG: a name for another format is refused before anything is written.
    @Test func aPhotoMustBeNamedAsAJPEG() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["p.png", "p.mp4", "p"] {
            let run = try Self.capture(["photo", "--camera", "sim:back", "\(dir)/\(name)"])
            #expect(run.status == 64 && run.stderr.contains("must be named .jpg or .jpeg"), "\(name): \(run.stderr)")
            #expect(!FileManager.default.fileExists(atPath: "\(dir)/\(name)"))
        }
        let ok = try Self.capture(["photo", "--camera", "sim:back", "\(dir)/p.JPEG"])
        #expect(ok.status == 0, "\(ok.stderr)")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/p.JPEG"))
        #expect(bytes.prefix(3) == Data([0xFF, 0xD8, 0xFF]))
    }

    /// A microphone is not a camera (and a camera not a microphone): refused, nothing recorded.
    @Test func aDeviceOfTheWrongKindIsRefused() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let mic = try Self.capture(["record", "--camera", "sim:mic", "--duration", "0.5", "--pace", "virtual", "\(dir)/a.mp4"])
        #expect(mic.status == 1 && mic.stderr.contains("--camera sim:mic is not a camera"), "\(mic.stderr)")
        let cam = try Self.capture(["record", "--microphone", "sim:back", "--duration", "0.5", "--pace", "virtual", "\(dir)/b.mp4"])
        #expect(cam.status == 1 && cam.stderr.contains("--microphone sim:back is not a microphone"), "\(cam.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/a.mp4") && !FileManager.default.fileExists(atPath: "\(dir)/b.mp4"))
    }

    /// A QR payload's control bytes (here an escape sequence that would clear the screen, and a
    /// bell) reach the terminal escaped; --json escapes them as JSON does.
    @Test func scanEscapesControlBytesInPayloads() throws {
        let payload = "\u{1B}[2Jhi\u{07}"
        let text = try Self.capture(["scan", "--camera", "sim:back", "--duration", "0.5", "--types", "qr", "--control", "scene.qrCode=\(payload)"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains(#""\u{1B}[2Jhi\u{7}""#), "\(text.stdout)")
        #expect(!text.stdout.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "raw control bytes in: \(text.stdout.debugDescription)")
        let json = try Self.capture(["scan", "--camera", "sim:back", "--duration", "0.5", "--types", "qr", "--json", "--control", "scene.qrCode=\(payload)"])
        #expect(json.status == 0 && json.stdout.contains(#"\u001b[2Jhi\u0007"#), "\(json.stdout)")
        #expect(!json.stdout.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
    }

    @Test func unclearValuesGetClearMessages() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bitrate = try Self.capture(["record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual", "--bitrate", "1", "\(dir)/a.mp4"])
        #expect(bitrate.status == 64 && bitrate.stderr.contains("--bitrate is in bits per second and must be at least 1000"), "\(bitrate.stderr)")
        let negative = try Self.capture(["record", "--camera", "sim:back", "--duration", "-1", "\(dir)/b.mp4"])
        #expect(negative.status == 64 && negative.stderr.contains("--duration must be a positive number of seconds, not -1"), "\(negative.stderr)")
        // The library says the same for a bitrate the encoders cannot take.
        let settings = VideoEncoderSettings(dimensions: Dimensions(width: 64, height: 48), inputPixelFormat: .nv12,
                                            frameDuration: MediaTime(value: 1, timescale: 30), bitrate: 999)
        do {
            _ = try MovieWriter(path: "\(dir)/c.mp4", fileType: .mp4, video: settings, audio: nil)
            Issue.record("a 999 bit/s encoder opened")
        } catch {
            #expect("\(error)".contains("below 1000 bit/s"), "\(error)")
        }
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/a.mp4") && !FileManager.default.fileExists(atPath: "\(dir)/b.mp4"))
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/c.mp4"))
    }
}
