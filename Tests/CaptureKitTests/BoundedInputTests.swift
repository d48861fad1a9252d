import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Every wait has a bound (issue 39, class 4): inputs that used to block for ever — a FIFO given as
/// a media file, a fixture or a scenario, an empty type list, a scenario fault that stalls for
/// hours, a fixture whose format does not match the scenario, a frame interval longer than the
/// recording — end with a clear error within `bound`, measured from the launch of the real
/// `capture` binary (run under coreutils `timeout`, so a regression fails instead of hanging CI).
@Suite struct BoundedInputTests {
    /// Generous for a loaded 2-core machine: each case ends in well under a second when idle.
    static let bound = 10.0

    struct Bounded {
        var result: TestSupport.ToolResult
        var seconds: Double
        var timedOut: Bool { result.status == 124 || result.status == 137 || result.status == 9 }
    }

    static func capture(_ arguments: [String]) throws -> Bounded {
        let start = Date()
        let result = try TestSupport.run("timeout", ["-k", "2", String(Int(bound)), CommandLineTests.binary] + arguments)
        return Bounded(result: result, seconds: Date().timeIntervalSince(start))
    }

    static func expectRefused(_ run: Bounded, _ message: String, _ comment: String) {
        #expect(!run.timedOut, "\(comment): still waiting after \(bound) s")
        #expect(run.seconds < bound, "\(comment): took \(run.seconds) s")
        #expect(run.result.status != 0, "\(comment): exit 0")
        #expect(run.result.stderr.contains(message) || run.result.stdout.contains(message),
                "\(comment): '\(message)' not in: \(run.result.stderr) \(run.result.stdout)")
    }

    @Test func aFIFOIsRefusedWhereverAFileIsRead() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["movie.mp4", "take.nut", "scenario.json"] { #expect(mkfifo("\(dir)/\(name)", 0o644) == 0) }
        Self.expectRefused(try Self.capture(["inspect", "\(dir)/movie.mp4"]), "FIFO", "inspect")
        Self.expectRefused(try Self.capture(["fixture", "info", "\(dir)/take.nut"]), "FIFO", "fixture info")
        Self.expectRefused(try Self.capture(["record", "--camera", "fixture:\(dir)/take.nut", "--duration", "0.5", "--pace", "virtual",
                                             "\(dir)/out.mp4"]), "FIFO", "a fixture: camera")
        Self.expectRefused(try Self.capture(["test", "\(dir)/scenario.json"]), "FIFO", "a scenario file")
        // A scenario naming a FIFO as its fixture.
        let scenario = "\(dir)/uses-fifo.json"
        try #"{"version": 1, "duration": 1, "devices": {"camera": {"fixture": "take.nut"}}, "expectations": {"frames": 30}}"#
            .write(toFile: scenario, atomically: true, encoding: .utf8)
        Self.expectRefused(try Self.capture(["test", scenario]), "FIFO", "a scenario's fixture")
        // A character device as a media file: refused, not read for ever.
        Self.expectRefused(try Self.capture(["inspect", "/dev/zero"]), "character device", "inspect /dev/zero")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/out.mp4"))
    }

    @Test func anEmptyTypeListIsAnError() throws {
        for types in ["", ",", " , "] {
            let run = try Self.capture(["scan", "--camera", "sim:back", "--duration", "0.5", "--types", types])
            Self.expectRefused(run, "--types needs at least one type", "scan --types '\(types)'")
            #expect(run.result.status == 64)
        }
        let record = try Self.capture(["record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual", "--metadata",
                                       "--metadata-types", "", "/tmp/never-written-\(UUID().uuidString).mp4"])
        Self.expectRefused(record, "--types needs at least one type", "record --metadata-types ''")
    }

    /// Fault values are checked against the scenario's duration when it is read.
    @Test func faultValuesThatWouldRunForHoursAreRefusedAtParseTime() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func scenario(_ fault: String) -> String {
            #"{"version": 1, "duration": 3, "devices": {"camera": {"device": "sim:back", "format": "640x480@30"}, "microphone": {"device": "sim:mic"}}, "#
                + #""faults": [\#(fault)], "expectations": {"frames": 90}}"#
        }
        let cases: [(String, String, String)] = [
            (#"{"at": 0, "kind": "slowDisk", "milliseconds": 1000000}"#, "faults[0].milliseconds", "more than the 60 s a scenario may add"),
            (#"{"at": 0, "kind": "slowEncoder", "milliseconds": 5000}"#, "faults[0].milliseconds", "more than the 60 s a scenario may add"),
            (#"{"at": 2, "kind": "stall", "milliseconds": 5000}"#, "faults[0].milliseconds", "longer than the 1 s left"),
            (#"{"at": 1, "kind": "audioGap", "milliseconds": 86400000}"#, "faults[0].milliseconds", "longer than the 2 s left"),
            (#"{"frame": 0, "kind": "jitter", "microseconds": 1000000000}"#, "faults[0].microseconds", "more than a frame period"),
        ]
        for (i, (fault, field, message)) in cases.enumerated() {
            let file = "\(dir)/case\(i).json"
            try scenario(fault).write(toFile: file, atomically: true, encoding: .utf8)
            Self.expectRefused(try Self.capture(["test", file]), "field '\(field)': ", fault)
            #expect(throws: CaptureError.self) { try Scenario.load(path: file) }
            do { _ = try Scenario.load(path: file) } catch { #expect("\(error)".contains(message), "\(error)") }
        }
        // The shipped slow-disk scenario (5 ms a write) is still fine.
        let shipped = try Scenario.parse(Data(scenario(#"{"at": 0, "kind": "slowDisk", "milliseconds": 5}"#).utf8), file: "ok.json")
        #expect(shipped.faults.events.count == 1)
    }

    /// A fixture that does not hold the scenario's format fails at once (it used to wait 60 s for a
    /// recording that never started), as `record` refuses it.
    @Test func aMismatchedFixtureFailsFast() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let made = try TestSupport.run(CommandLineTests.binary, ["fixture", "record", "--camera", "sim:back", "--duration", "0.5",
                                                                 "--pace", "virtual", "\(dir)/take.nut"])
        try #require(made.status == 0, "\(made.stderr)")
        let file = "\(dir)/mismatch.json"
        try #"{"version": 1, "duration": 1, "devices": {"camera": {"fixture": "take.nut", "format": "1280x720@30"}}, "expectations": {"frames": 30}}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        Self.expectRefused(try Self.capture(["test", file]), "the fixture holds only video NV12 640x480", "test with a mismatched fixture")
        Self.expectRefused(try Self.capture(["record", "--camera", "fixture:\(dir)/take.nut", "--format", "1280x720@30", "--duration", "1",
                                             "--pace", "virtual", "\(dir)/out.mp4"]), "the fixture holds only", "record")
    }

    /// A frame interval longer than the recording would record one frame and run for
    /// interval × period (33 s at 1000 frames, 30 fps): refused, naming the largest that fits.
    @Test func aFrameIntervalLongerThanTheRecordingIsRefused() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let run = try Self.capture(["record", "--camera", "sim:back", "--duration", "1", "--frame-interval", "1000", "\(dir)/out.mp4"])
        Self.expectRefused(run, "--frame-interval 1000 keeps one frame every 33.3333 s", "realtime")
        #expect(run.result.stderr.contains("use at most 30"), "\(run.result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: "\(dir)/out.mp4"))
        // The largest interval that fits still records.
        let fits = try Self.capture(["record", "--camera", "sim:back", "--duration", "1", "--frame-interval", "30", "--pace", "virtual",
                                     "--preset", "ultrafast", "\(dir)/fits.mp4"])
        #expect(fits.result.status == 0, "\(fits.result.stderr)")
    }
}
