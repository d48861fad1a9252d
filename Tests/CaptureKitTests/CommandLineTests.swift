import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// The `capture` tool's contract, run as a separate process (the binary SwiftPM built beside the tests).
@Suite struct CommandLineTests {
    static var binary: String {
        let tests = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        // Linux: .build/<config>/CaptureKitPackageTests.xctest; the tool sits beside it.
        var folder = tests.deletingLastPathComponent()
        if folder.lastPathComponent == "MacOS" { folder = folder.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent() }
        return folder.appendingPathComponent("capture").path
    }

    @Test func devicesListsTheSimulatorWithFormats() throws {
        let result = try TestSupport.run(Self.binary, ["devices", "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let devices = try #require((try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])?["devices"] as? [[String: Any]])
        let ids = devices.compactMap { $0["uniqueID"] as? String }
        #expect(ids.contains("sim:back") && ids.contains("sim:mic"))
        let back = try #require(devices.first { $0["uniqueID"] as? String == "sim:back" })
        let formats = try #require(back["formats"] as? [[String: Any]])
        #expect(formats.contains { $0["width"] as? Int == 1280 && $0["height"] as? Int == 720 })
        #expect(formats.contains { $0["pixelFormat"] as? String == "NV12" })
    }

    /// sim:back offers NV12 640x480 in video range (420v) and full range (420f): two formats that
    /// `capture devices` once printed as the same `NV12 640x480 @ 1-30 fps` line twice.
    @Test func devicesTellsVideoRangeFromFullRange() throws {
        let result = try TestSupport.run(Self.binary, ["devices"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        let start = try #require(lines.firstIndex { $0.hasPrefix("sim:back\t") })
        let formats = lines[(start + 1)...].prefix { $0.hasPrefix(" ") }.map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(formats.count > 2)
        #expect(Set(formats).count == formats.count, "repeated lines: \(formats)")
        #expect(formats.contains { $0.hasPrefix("420v 640x480 @ ") } && formats.contains { $0.hasPrefix("420f 640x480 @ ") }, "\(formats)")
        // The same names as `capture formats` prints.
        let named = try TestSupport.run(Self.binary, ["formats", "sim:back"])
        #expect(named.status == 0, "\(named.stderr)")
        for line in formats {
            let at = try #require(line.range(of: " @ "))
            let name = String(line[..<at.lowerBound])
            #expect(named.stdout.contains(": \(name) @ ") || named.stdout.contains(": \(name)\n"), "\(name) not in capture formats")
        }
        // JSON keeps the pixel format and says the range.
        let json = try TestSupport.run(Self.binary, ["devices", "--json"])
        let devices = try #require((try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])?["devices"] as? [[String: Any]])
        let back = try #require(devices.first { $0["uniqueID"] as? String == "sim:back" }?["formats"] as? [[String: Any]])
        let vga = back.filter { $0["pixelFormat"] as? String == "NV12" && $0["width"] as? Int == 640 && $0["height"] as? Int == 480 }
        #expect(Set(vga.compactMap { $0["fullRange"] as? Bool }) == [false, true])
        #expect(Set(vga.compactMap { $0["name"] as? String }) == ["420v 640x480", "420f 640x480"])
    }

    @Test func recordPrintsAJSONSummaryOfWhatItMade() throws {
        let path = try TestSupport.temporaryDirectory() + "/cli.mp4"
        let result = try TestSupport.run(Self.binary, [
            "record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "2", "--size", "1280x720",
            "--fps", "30", "--pace", "virtual", "--seed", "3", "--preset", "ultrafast", "--bitrate", "60000", "--json", path,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any])
        let recording = try #require(summary["recording"] as? [String: Any])
        #expect(recording["videoFrames"] as? Int == 60)
        #expect(recording["audioSamples"] as? Int == 96_000)
        let file = try #require(summary["file"] as? [String: Any])
        let streams = try #require(file["streams"] as? [[String: Any]])
        #expect(streams.map { $0["codec"] as? String } == ["h264", "aac"])
        #expect(streams.first?["width"] as? Int == 1280)
        // --bitrate reaches the encoder: the stream lands near 60 kb/s (CRF 23 gives about twice that here).
        let bitrate = try #require(TestSupport.probeStreams(path).first?["bit_rate"] as? String).flatMap(Int.init) ?? 0
        #expect(bitrate > 40_000 && bitrate < 90_000, "video bitrate \(bitrate)")
    }

    @Test func badArgumentsFailWithAMessage() throws {
        let dir = try TestSupport.temporaryDirectory()
        let badSize = try TestSupport.run(Self.binary, ["record", "--camera", "sim:back", "--duration", "1", "--size", "123x45",
                                                        "--pace", "virtual", dir + "/x.mp4"])
        #expect(badSize.status != 0)
        #expect(badSize.stderr.contains("123x45"))
        let badDevice = try TestSupport.run(Self.binary, ["record", "--camera", "sim:nope", "--duration", "1", dir + "/y.mp4"])
        #expect(badDevice.status != 0)
        #expect(badDevice.stderr.contains("sim:nope"))
        let missingFolder = try TestSupport.run(Self.binary, ["record", "--camera", "sim:back", "--duration", "1",
                                                              "--pace", "virtual", dir + "/missing/z.mp4"])
        #expect(missingFolder.status != 0)
        #expect(missingFolder.stderr.contains("folder does not exist"))
        let noInputs = try TestSupport.run(Self.binary, ["record", "--duration", "1", dir + "/w.mp4"])
        #expect(noInputs.status != 0)
    }

    @Test func interruptFinalizesTheFileAndExitsZero() async throws {
        let path = try TestSupport.temporaryDirectory() + "/interrupted.mp4"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binary)
        // Real-time pace and a long duration: the recording is still going when the signal lands,
        // however loaded the machine is, without encoding flat out on both cores meanwhile.
        process.arguments = ["record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "3600",
                             "--pace", "realtime", "--fragment-interval", "0", "--preset", "ultrafast", "--json", path]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Signal once the recording has written frames (64 KiB of the file: the muxer's buffer
        // flushed more than once), so the handler is installed and frames are in.
        let size = { ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0 }
        try await eventually("the recording to write 64 KiB to \(path)", timeout: .seconds(120)) { size() >= 65_536 }
        kill(process.processIdentifier, SIGINT)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let summary = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let recording = try #require(summary["recording"] as? [String: Any])
        #expect(recording["stopReason"] as? String == "requested")
        // Unfragmented (--fragment-interval 0): only a finalized file has its moov and plays.
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
        // No upper bound: how many frames fit before the signal depends on the machine's load.
        #expect(recording["videoFrames"] as? Int ?? 0 > 0)
        #expect(recording["fileIsUsable"] as? Bool == true)
    }

    @Test func photoWritesAJPEGWithOrientation() throws {
        let dir = try TestSupport.temporaryDirectory()
        let result = try TestSupport.run(Self.binary, ["photo", "--camera", "sim:back", "--rotation", "180", "--quality", "0.6",
                                                       "--json", dir + "/still.jpg"])
        #expect(result.status == 0, "\(result.stderr)")
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: dir + "/still.jpg")))
        #expect(ExifOrientation.read(from: bytes) == 3)
        #expect(try JPEGCodec().decode(bytes).width == 640)
        let noFlash = try TestSupport.run(Self.binary, ["photo", "--camera", "sim:back", "--flash", "on", dir + "/flash.jpg"])
        if noFlash.status != 0 { #expect(noFlash.stderr.contains("flash")) }
        let exists = try TestSupport.run(Self.binary, ["photo", "--camera", "sim:back", dir + "/still.jpg"])
        #expect(exists.status != 0 && exists.stderr.contains("exists there") && exists.stderr.contains("--overwrite"), "\(exists.stderr)")
    }
}
