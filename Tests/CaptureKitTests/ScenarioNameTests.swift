import CaptureKit
import CaptureKitTesting
import Foundation
import Testing

/// Names from input files are data, not paths: a scenario named `..`, `/etc` or `a/../../b` writes
/// nothing outside `--artifacts` (the file format refuses such names; a scenario built in code with
/// them gets a safe folder), and scenarios with the same name never share a folder.
@Suite struct ScenarioNameTests {
    static func json(name: String?) -> String {
        let key = name.map { "\"name\": \(String(decoding: try! JSONEncoder().encode($0), as: UTF8.self)), " } ?? ""
        return """
            {"version": 1, \(key)"seed": 7, "duration": 0.3,
             "devices": {"camera": {"device": "sim:back", "format": "640x480@30"}},
             "expectations": {"playable": true}}
            """
    }

    /// Everything under `root` except `skip`, as relative paths (names and sizes).
    static func listing(_ root: String, skipping skip: String) -> [String] {
        let items = FileManager.default.enumerator(atPath: root)?.allObjects as? [String] ?? []
        return items.filter { !$0.hasPrefix(skip) }.sorted()
    }

    static let hostile = ["..", "/etc", "a/../../b", "", ".", "../../../../tmp/escaped"]

    /// The CLI: the file format refuses each hostile name with a message naming the field; the
    /// folders around `--artifacts` (and /etc) are unchanged.
    @Test func hostileNamesInFilesAreRefusedAndWriteNothingOutsideArtifacts() async throws {
        let root = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/work/artifacts", withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: root + "/work/keep.txt"))
        let etcBefore = try FileManager.default.contentsOfDirectory(atPath: "/etc").sorted()
        for (i, name) in Self.hostile.enumerated() {
            let file = root + "/work/s\(i).json"
            try Data(Self.json(name: name).utf8).write(to: URL(fileURLWithPath: file))
            let before = Self.listing(root, skipping: "work/artifacts")
            let result = try await offPool(CommandLineTests.binary, ["test", file, "--artifacts", root + "/work/artifacts"])
            #expect(result.status != 0 && (result.stdout + result.stderr).contains("name"), "'\(name)': \(result.stdout) \(result.stderr)")
            #expect(Self.listing(root, skipping: "work/artifacts") == before, "'\(name)' wrote outside --artifacts")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: "/etc").sorted() == etcBefore)
        #expect(try String(contentsOfFile: root + "/work/keep.txt", encoding: .utf8) == "keep")
    }

    /// The runner given the same names in code (past the parser): each gets one safe folder inside
    /// the artifacts folder; nothing appears beside it, in its parent, or in /etc.
    @Test func theRunnerKeepsAnyNameInsideItsFolder() async throws {
        let root = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let artifacts = root + "/deep/artifacts"
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        let etcBefore = try FileManager.default.contentsOfDirectory(atPath: "/etc").sorted()
        var scenario = try Scenario.parse(Data(Self.json(name: "x").utf8), file: root + "/x.json")
        for name in Self.hostile {
            scenario.name = name
            let result = await ScenarioRunner.run(scenario, options: ScenarioRunner.Options(artifactsDirectory: artifacts))
            #expect(result.problem == nil, "'\(name)': \(result.problem ?? "")")
            #expect(!result.artifacts.isEmpty)
            for path in result.artifacts {
                let folder = (path as NSString).deletingLastPathComponent
                #expect((folder as NSString).deletingLastPathComponent == artifacts, "'\(name)' wrote \(path)")
            }
        }
        let folders = try FileManager.default.contentsOfDirectory(atPath: artifacts).sorted()
        #expect(folders == ["_", "_.", "_..", "_etc", "a_.._.._b", ".._.._.._.._tmp_escaped"].sorted(), "\(folders)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: root).sorted() == ["deep"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: root + "/deep").sorted() == ["artifacts"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: "/etc").sorted() == etcBefore)
    }

    /// Two scenarios with one name, run at once (`--jobs 2`), and the same run again into the same
    /// folder: four folders, each with its own complete artifacts; nothing overwritten.
    @Test func sameNamedScenariosAndRepeatedRunsNeverShareAFolder() async throws {
        let root = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/scenarios", withIntermediateDirectories: true)
        for file in ["one", "two"] {
            try Data(Self.json(name: "dup").utf8).write(to: URL(fileURLWithPath: root + "/scenarios/\(file).json"))
        }
        for _ in 0..<2 {
            let result = try await offPool(CommandLineTests.binary, ["test", root + "/scenarios", "--jobs", "2", "--artifacts", root + "/artifacts"])
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        }
        let folders = try FileManager.default.contentsOfDirectory(atPath: root + "/artifacts").sorted()
        #expect(folders == ["dup", "dup-2", "dup-3", "dup-4"], "\(folders)")
        for folder in folders {
            let files = try FileManager.default.contentsOfDirectory(atPath: root + "/artifacts/" + folder)
            #expect(files.contains("movie.mp4") && files.contains("result.json"), "\(folder): \(files)")
        }
    }
}
