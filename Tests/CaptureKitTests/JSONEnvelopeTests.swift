import CaptureKit
import Foundation
import Testing

/// Every `--json` output carries the same envelope: `schemaVersion`, `command`, `captureKitVersion`,
/// then the command's own keys (lists under a key named after the command).
@Suite struct JSONEnvelopeTests {
    static func object(_ text: Substring) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    static func check(_ arguments: [String], command: String, keys: [String], lastLine: Bool = false) async throws -> [String: Any] {
        let result = try await offPool(CommandLineTests.binary, arguments)
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
        let text = lastLine ? (result.stdout.split(separator: "\n").last ?? "") : Substring(result.stdout)
        let o = try object(text)
        #expect(o["schemaVersion"] as? Int == 1, "\(arguments)")
        #expect(o["command"] as? String == command)
        #expect(o["captureKitVersion"] as? String == CaptureKit.version)
        for key in keys { #expect(o[key] != nil, "\(command): no \(key) in \(o.keys.sorted())") }
        return o
    }

    @Test func everyJSONOutputHasTheEnvelope() async throws {
        let dir = try TestSupport.temporaryDirectory()
        let devices = try await Self.check(["devices", "--json"], command: "devices", keys: ["devices"])
        #expect((devices["devices"] as? [[String: Any]])?.contains { $0["uniqueID"] as? String == "sim:back" } == true)
        let formats = try await Self.check(["formats", "sim:back", "--json"], command: "formats", keys: ["formats"])
        #expect(((formats["formats"] as? [Any])?.count ?? 0) > 0)
        _ = try await Self.check(["controls", "sim:back", "--json"], command: "controls", keys: ["controls"])
        let movie = dir + "/m.mp4"
        let record = try await Self.check(["record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual", "--json", movie],
                                          command: "record", keys: ["recording", "file", "output"])
        #expect((record["recording"] as? [String: Any])?["videoFrames"] as? Int == 15)
        let inspect = try await Self.check(["inspect", movie, "--json"], command: "inspect", keys: ["streams", "decodedVideoFrames"])
        #expect(inspect["decodedVideoFrames"] as? Int == 15)
        _ = try await Self.check(["photo", "--camera", "sim:back", "--json", dir + "/p.jpg"], command: "photo", keys: [])
        let fixture = dir + "/f.nut"
        _ = try await Self.check(["fixture", "record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual", "--json", fixture],
                                 command: "fixture record", keys: [])
        _ = try await Self.check(["fixture", "info", fixture, "--json"], command: "fixture info", keys: ["devices"])
        // scan --json: JSON lines of detections, then the summary line in the envelope.
        _ = try await Self.check(["scan", "--camera", "sim:back", "--duration", "0.2", "--pace", "virtual", "--json"],
                                 command: "scan", keys: ["summary"], lastLine: true)
    }
}
