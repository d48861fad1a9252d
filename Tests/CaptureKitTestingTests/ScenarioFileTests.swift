import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Scenario files decode strictly: each malformed document names the file, the JSON path of the
/// field and what is allowed.
@Suite struct ScenarioFileTests {
    static let valid = """
        {"version": 1, "name": "ok", "duration": 3, "seed": 4,
         "devices": {"camera": {"device": "sim:back", "format": "640x480@30"}, "microphone": {"device": "sim:mic"}},
         "outputs": {"movie": {"container": "mov"}, "metadata": ["qr"]},
         "controls": ["1.5:exposure.bias=1"],
         "faults": [{"frame": 10, "kind": "dropFrames", "count": 2},
                    {"at": 1.0, "kind": "corruptFrame", "corruption": "truncated"},
                    {"at": 2.0, "device": "microphone", "kind": "audioGap", "milliseconds": 40},
                    {"at": 2.5, "kind": "diskFull", "bytes": 100000}],
         "expectations": {"frames": {"min": 80, "max": 90}, "missingFrames": [11, 10], "maxAVOffset": 0.04,
                          "errors": [{"type": "diskFull", "at": 2.5}], "metadata": {"qr": 0}, "audio": {"frequency": {"min": 990, "max": 1010}}}}
        """

    static func parse(_ text: String) throws(CaptureError) -> Scenario {
        try Scenario.parse(Data(text.utf8), file: "bad.json")
    }

    /// The error's file, field and problem.
    static func failure(_ text: String) -> (file: String, field: String, problem: String)? {
        do {
            _ = try parse(text)
            return nil
        } catch {
            guard case .invalidScenario(let file, let field, let problem) = error else { return ("?", "?", "\(error)") }
            return (file, field, problem)
        }
    }

    @Test func aValidFileMapsOntoTheFaultTimeline() throws {
        let s = try Self.parse(Self.valid)
        #expect(s.name == "ok" && s.seed == 4 && s.duration == 3)
        #expect(s.camera?.uniqueID == "sim:back" && s.microphone?.uniqueID == "sim:mic")
        #expect(s.outputs.movieContainer == "mov" && s.outputs.metadataTypes == ["qr"])
        #expect(s.faults.events == [
            FaultEvent(at: .frame(10), device: "sim:back", fault: .dropFrames(count: 2)),
            FaultEvent(at: .time(MediaTime(seconds: 1, preferredTimescale: 1_000_000)), device: "sim:back", fault: .corruptFrame(.truncated)),
            FaultEvent(at: .time(MediaTime(seconds: 2, preferredTimescale: 1_000_000)), device: "sim:mic", fault: .audioGap(milliseconds: 40)),
            FaultEvent(at: .time(MediaTime(seconds: 2.5, preferredTimescale: 1_000_000)), device: nil, fault: .diskFull(bytes: 100_000)),
        ])
        #expect(s.expectations.missingFrames == [10, 11])
        #expect(s.expectations.frames == Scenario.Range(min: 80, max: 90))
        #expect(s.expectations.errors == [Scenario.ExpectedError(type: "diskFull", at: 2.5)])
        #expect(s.controls == ["1.5:exposure.bias=1"])
    }

    @Test func anUnknownKeyIsNamedWithItsPathAndTheAllowedKeys() throws {
        let f = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"count\": 2", with: "\"count\": 2, \"cuont\": 3")))
        #expect(f.file == "bad.json")
        #expect(f.field == "faults[0].cuont")
        #expect(f.problem.contains("unknown key") && f.problem.contains("count"), "\(f.problem)")
        let top = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"seed\": 4", with: "\"sead\": 4")))
        #expect(top.field == "sead")
        #expect(top.problem.contains("duration") && top.problem.contains("faults"))
    }

    @Test func aWrongTypeIsNamed() throws {
        let f = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"at\": 1.0", with: "\"at\": \"one\"")))
        #expect(f.field == "faults[1].at")
        #expect(f.problem.contains("must be a number") && f.problem.contains("a string"))
        let b = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"seed\": 4", with: "\"seed\": true")))
        #expect(b.field == "seed")
        #expect(b.problem.contains("a boolean"))
    }

    @Test func aFaultPastTheEndIsRefused() throws {
        let t = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"at\": 2.5", with: "\"at\": 3.5")))
        #expect(t.field == "faults[3].at")
        #expect(t.problem.contains("past the end") && t.problem.contains("at < 3"), "\(t.problem)")
        let f = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"frame\": 10", with: "\"frame\": 90")))
        #expect(f.field == "faults[0].frame")
        #expect(f.problem.contains("0…89"), "\(f.problem)")
    }

    @Test func anUnknownDeviceIsRefused() throws {
        let d = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"device\": \"sim:back\"", with: "\"device\": \"sim:nope\"")))
        #expect(d.field == "devices.camera.device")
        #expect(d.problem.contains("sim:back"), "\(d.problem)")
        let fault = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"device\": \"microphone\"", with: "\"device\": \"speaker\"")))
        #expect(fault.field == "faults[2].device")
        #expect(fault.problem.contains("camera (sim:back)") && fault.problem.contains("microphone (sim:mic)"))
    }

    @Test func anUnknownFaultKindListsTheKinds() throws {
        let k = try #require(Self.failure(Self.valid.replacingOccurrences(of: "\"kind\": \"dropFrames\"", with: "\"kind\": \"explode\"")))
        #expect(k.field == "faults[0].kind")
        #expect(k.problem.contains("dropFrames") && k.problem.contains("slowEncoder"))
    }

    @Test func theErrorDescriptionNamesFileFieldAndFormat() {
        let error = CaptureError.invalidScenario(file: "x.json", field: "faults[2].at", problem: "must be a number")
        #expect(error.description.contains("x.json") && error.description.contains("faults[2].at") && error.description.contains("README"))
    }

    /// Inputs that once could have tripped the parser: each is rejected with a typed error, never a trap.
    @Test(arguments: ["", "null", "[]", "{\"version\": 1}", "{\"version\": 1e300, \"duration\": 3}", "{\"version\": 1, \"duration\": -1}",
                      "{\"version\": 1, \"duration\": 3, \"devices\": {}}", "{\"version\": 1, \"duration\": 3, \"devices\": {\"camera\": {\"device\": \"sim:back\"}}, \"faults\": [{\"frame\": -5, \"kind\": \"dropFrames\"}], \"expectations\": {\"frames\": 1}}",
                      "{\"version\": 1, \"duration\": 3, \"devices\": {\"camera\": {\"device\": \"sim:back\"}}, \"faults\": [{\"frame\": 1e20, \"kind\": \"dropFrames\"}], \"expectations\": {\"frames\": 1}}",
                      "{\"version\": 1, \"duration\": 3, \"devices\": {\"camera\": {\"device\": \"sim:back\"}}, \"expectations\": {\"frames\": {\"min\": 5, \"max\": 1}}}",
                      "{\"version\": 1, \"duration\": 3, \"devices\": {\"camera\": {\"device\": \"sim:back\"}}, \"expectations\": {}}",
                      "\u{FEFF}{\"version\": 1}", "{\"version\": 1, \"duration\": 3, \"devices\": {\"camera\": {\"device\": \"sim:back\"}}, \"controls\": [\"x\"], \"expectations\": {\"frames\": 1}}"])
    func malformedInputsAreTypedErrors(_ text: String) {
        #expect(throws: CaptureError.self) { try Self.parse(text) }
    }
}

/// A small deterministic mutation fuzz of the parser (the coverage-guided one is `ci/fuzz scenario`):
/// byte flips, truncations, deleted and duplicated spans of a valid document. Every mutant either
/// decodes or is refused with `invalidScenario` naming a field — never a trap, never another error.
@Suite struct ScenarioParserMutationTests {
    @Test func mutantsDecodeOrAreRefusedNamingAField() {
        let original = Array(ScenarioFileTests.valid.utf8)
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(max(bound, 1)))
        }
        var accepted = 0, refused = 0
        let alphabet = Array("{}[]\":,0123456789.-e truefalsnul".utf8)
        for _ in 0..<3000 {
            var bytes = original
            for _ in 0...next(3) {
                switch next(4) {
                case 0: bytes[next(bytes.count)] = alphabet[next(alphabet.count)]
                case 1: bytes = Array(bytes.prefix(next(bytes.count)))
                case 2:
                    let start = next(bytes.count), length = next(20)
                    bytes.removeSubrange(start..<min(bytes.count, start + length))
                default:
                    let start = next(bytes.count), length = next(20)
                    bytes.insert(contentsOf: bytes[start..<min(bytes.count, start + length)], at: next(bytes.count))
                }
                if bytes.isEmpty { bytes = original }
            }
            do {
                _ = try Scenario.parse(Data(bytes), file: "mutant.json")
                accepted += 1
            } catch {
                guard case .invalidScenario(let file, let field, let problem) = error else {
                    Issue.record("not an invalidScenario error: \(error)")
                    continue
                }
                #expect(file == "mutant.json" && !field.isEmpty && !problem.isEmpty, "field \(field): \(problem)")
                refused += 1
            }
        }
        #expect(accepted + refused == 3000)
        #expect(refused > 2000, "most mutants are malformed (\(refused) refused)")
    }
}
