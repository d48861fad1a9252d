import CaptureKit
import Foundation
import Testing

/// `capture test`: the shipped scenarios pass, a wrong expectation fails naming the scenario, the
/// expectation and the measured value, shards partition the set, the JUnit report validates with an
/// independent parser (Python's junitparser).
@Suite struct ScenarioCommandTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let scenarios = repository.appendingPathComponent("Simulator/Scenarios").path

    static func folder() throws -> String {
        let path = NSTemporaryDirectory() + "capturekit-scenarios-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static var shippedNames: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: scenarios)) ?? []).filter { $0.hasSuffix(".json") }
            .map { ($0 as NSString).deletingPathExtension }.sorted()
    }

    /// junitparser (pip, ci/setup) is the independent JUnit reader.
    static let hasJunitparser: Bool = (try? TestSupport.run("python3", ["-c", "import junitparser"]).status == 0) ?? false

    /// Reads a JUnit file with junitparser: "tests failures" and each failed case's name and message.
    static func junitparser(_ path: String) async throws -> TestSupport.ToolResult {
        let script = """
            import sys
            from junitparser import JUnitXml, Failure
            xml = JUnitXml.fromfile(sys.argv[1])
            tests = failures = 0
            for suite in xml:
                for case in suite:
                    tests += 1
                    for r in case.result:
                        if isinstance(r, Failure):
                            failures += 1
                            print("FAILED", case.name, "|", r.message)
            print("TOTAL", tests, failures)
            """
        return try await offPool("python3", ["-c", script, path])
    }

    @Test func theShippedScenariosAllPassInParallel() async throws {
        let out = try Self.folder()
        #expect(Self.shippedNames.count >= 20)
        let result = try await offPool(CommandLineTests.binary, ["test", Self.scenarios, "--jobs", "2", "--junit", out + "/report.xml",
                                                                 "--json", out + "/report.json"])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("\(Self.shippedNames.count) scenarios, 0 failed"), "\(result.stdout)")
        #expect(result.stdout.contains("[1/\(Self.shippedNames.count)] PASS"), "plain progress lines when not a terminal")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: out + "/report.json"))) as? [String: Any])
        let results = try #require(json["results"] as? [[String: Any]])
        #expect(results.compactMap { $0["name"] as? String }.sorted() == Self.shippedNames)
        #expect(json["failed"] as? Int == 0)
        if Self.hasJunitparser {
            let parsed = try await Self.junitparser(out + "/report.xml")
            #expect(parsed.status == 0, "\(parsed.stderr)")
            #expect(parsed.stdout.contains("TOTAL \(Self.shippedNames.count) 0"), "\(parsed.stdout)")
        }
    }

    @Test func aWrongExpectationFailsNamingScenarioExpectationAndMeasuredValue() async throws {
        let out = try Self.folder()
        // drop-single injects a drop of frame 30; claim that nothing is missing.
        var text = try String(contentsOfFile: Self.scenarios + "/drop-single.json", encoding: .utf8)
        text = text.replacingOccurrences(of: "\"missingFrames\": [\n      30\n    ]", with: "\"missingFrames\": []")
        #expect(text.contains("\"missingFrames\": []"))
        try text.write(toFile: out + "/drop-single.json", atomically: true, encoding: .utf8)
        let result = try await offPool(CommandLineTests.binary, ["test", out + "/drop-single.json", "--junit", out + "/report.xml",
                                                                 "--artifacts", out + "/artifacts"])
        #expect(result.status == 1, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.contains("drop-single: missingFrames: expected none, measured [30]"), "\(result.stdout)")
        #expect(result.stdout.contains("1 scenarios, 1 failed"))
        // What a person opens when CI goes red.
        for artifact in ["movie.mp4", "inspect.json", "contact-sheet.jpg", "av-offset.png", "result.json"] {
            #expect(FileManager.default.fileExists(atPath: out + "/artifacts/drop-single/" + artifact), "\(artifact)")
        }
    }

    @Test(.enabled(if: hasJunitparser, "python3 with junitparser is not installed (ci/setup pip-installs it)"))
    func theJUnitReportValidatesWithJunitparser() async throws {
        let out = try Self.folder()
        var text = try String(contentsOfFile: Self.scenarios + "/drop-single.json", encoding: .utf8)
        text = text.replacingOccurrences(of: "\"missingFrames\": [\n      30\n    ]", with: "\"missingFrames\": []")
        try text.write(toFile: out + "/drop-single.json", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: Self.scenarios + "/clean-baseline.json", toPath: out + "/clean-baseline.json")
        let result = try await offPool(CommandLineTests.binary, ["test", out, "--junit", out + "/report.xml"])
        #expect(result.status == 1)
        let parsed = try await Self.junitparser(out + "/report.xml")
        #expect(parsed.status == 0, "junitparser refused the report: \(parsed.stderr)")
        #expect(parsed.stdout.contains("FAILED drop-single | drop-single: missingFrames: expected none, measured [30]"), "\(parsed.stdout)\(parsed.stderr)")
        #expect(parsed.stdout.contains("TOTAL 2 1"), "\(parsed.stdout)")
    }

    @Test func shardsTogetherRunTheWholeSetExactlyOnce() async throws {
        // The shipped names, each as a cheap scenario (0.2 s, camera only, no movie): sharding looks at names only.
        let folder = try Self.folder()
        let names = Self.shippedNames
        for name in names {
            let text = """
                {"version": 1, "duration": 0.2, "devices": {"camera": {"device": "sim:back", "format": "640x480@30"}},
                 "outputs": {"movie": false}, "expectations": {"deliveredFrames": 6}}
                """
            try text.write(toFile: folder + "/\(name).json", atomically: true, encoding: .utf8)
        }
        var seen: [String] = []
        for shard in 1...3 {
            let json = folder + "-shard\(shard).json"  // beside the folder, not a scenario in it
            let result = try await offPool(CommandLineTests.binary, ["test", folder, "--shard", "\(shard)/3", "--json", json])
            #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: json))) as? [String: Any])
            let shardNames = try #require(object["results"] as? [[String: Any]]).compactMap { $0["name"] as? String }
            #expect(!shardNames.isEmpty, "shard \(shard)/3 is empty")
            seen += shardNames
        }
        #expect(seen.sorted() == names, "every scenario exactly once")
        let bad = try await offPool(CommandLineTests.binary, ["test", folder, "--shard", "4/3"])
        #expect(bad.status != 0)
    }

    @Test func aMalformedScenarioNamesFileFieldAndWhatIsAllowed() async throws {
        let folder = try Self.folder()
        let path = folder + "/late.json"
        try """
            {"version": 1, "duration": 3, "devices": {"camera": {"device": "sim:back"}},
             "faults": [{"at": 1, "kind": "dropFrames"}, {"at": 4.5, "kind": "stall", "milliseconds": 10}], "expectations": {"frames": 90}}
            """.write(toFile: path, atomically: true, encoding: .utf8)
        let result = try await offPool(CommandLineTests.binary, ["test", path])
        #expect(result.status == 1)
        #expect(result.stdout.contains("scenario \(path): field 'faults[1].at': 4.5 s is past the end"), "\(result.stdout)")
        #expect(result.stdout.contains("allowed: 0 ≤ at < 3"))
    }
}
