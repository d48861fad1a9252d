import CaptureFuzzTargets
import CaptureKit
import Foundation
import Testing

/// Every input that once crashed a parser (Fixtures/fuzz/TARGET/regressions), and every seed, runs
/// through its fuzz target here on every test run; the CLI paths those crashes came through give a
/// typed error and a non-zero exit.
@Suite struct FuzzRegressionTests {
    static let fuzzFolder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures/fuzz")

    @Test(arguments: FuzzTarget.allCases)
    func seedsAndRegressionsRunCleanly(_ target: FuzzTarget) throws {
        let folder = Self.fuzzFolder.appendingPathComponent(target.rawValue)
        var files = try FileManager.default.contentsOfDirectory(atPath: folder.path).map { folder.appendingPathComponent($0).path }
        let regressions = folder.appendingPathComponent("regressions").path
        files += ((try? FileManager.default.contentsOfDirectory(atPath: regressions)) ?? []).map { regressions + "/" + $0 }
        var ran = 0
        for file in files {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            target.run(try Data(contentsOf: URL(fileURLWithPath: file)))
            ran += 1
        }
        #expect(ran > 0, "no seed inputs for \(target.rawValue)")
    }

    /// Found while writing the control target: `--format ""` indexed an empty array and
    /// `--format 640x480@2147483648` / `--fps 2147483648` overflowed Int32 — all traps, now refused.
    @Test func formatAndRateTextThatCrashedIsRefused() throws {
        for text in ["", "@", ":", "@:", ":MJPG", "640x480@", "640x480@0", "640x480@-5", "640x480@2147483648",
                     "640x480@99999999999999999999", "640x480@30:", "640x480@30:NOPE", "x@30", "640x480@30:MJPG:extra"] {
            #expect(FormatRequest(text) == nil, "'\(text)' must be refused")
        }
        #expect(FormatRequest("1280x720@60:420f") == FormatRequest("1280x720@60:420f"))
        #expect(FormatRequest("1280x720@60:420f")?.frameDuration == MediaTime(value: 1, timescale: 60))
        for arguments in [["--format", ""], ["--format", "640x480@2147483648"], ["--fps", "2147483648"]] {
            let result = try TestSupport.run(CommandLineTests.binary, ["record", "--camera", "sim:back", "--duration", "1", "--pace", "virtual"]
                                             + arguments + [NSTemporaryDirectory() + "never-\(UUID().uuidString).mp4"])
            #expect(result.status != 0 && result.status < 128, "\(arguments): exit \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("Error") && !result.stderr.contains("Backtrace"), "\(arguments): \(result.stderr)")
        }
    }

    /// Found by `ci/fuzz jpeg` in its first 30 s: a 187-byte JPEG whose header claims a frame of
    /// 5.4 GB made the decoder allocate it. Now refused from the header, before any allocation.
    @Test func aJPEGClaimingAGiganticFrameIsRefusedBeforeAllocating() throws {
        let file = Self.fuzzFolder.appendingPathComponent("jpeg/regressions/oom-claims-5gb-frame.jpg")
        let bytes = try [UInt8](Data(contentsOf: file))
        #expect(throws: CaptureError.self) { _ = try JPEGCodec().decode(bytes) }
        do {
            _ = try JPEGCodec().decode(bytes)
        } catch {
            #expect(error.description.contains("claims"), "\(error)")
        }
    }
}
