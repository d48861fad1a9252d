import CaptureKit
import Foundation
import Testing

/// Every output option of every `capture` command, pointed at what a careless or hostile user might
/// give it: a directory (with a file inside), a character device made with mknod (/dev/null's
/// numbers, in a temporary folder), a FIFO, a symlink (to a file that must stay unchanged) and an
/// existing recording. Without `--overwrite` nothing at the path changes and the exit is non-zero
/// with a message naming the path; with `--overwrite` (where the command has it) only the regular
/// file is replaced, by rename (a new inode), and the other four are still left exactly as they were.
/// Runs as root (mknod needs CAP_MKNOD; CI runs as root), as a user running `capture` as root would.
@Suite(.enabled(if: geteuid() == 0, "mknod of a character device needs root"))
struct OutputPathKindsTests {
    enum Kind: String, CaseIterable { case directory, device, fifo, symlink, recording }

    /// One output option: the arguments that write `target`, given a fresh work folder and a real
    /// recording to read; `overwrite` when the command takes `--overwrite`.
    struct Option: CustomTestStringConvertible, Sendable {
        let name: String
        let ext: String
        let overwrite: Bool
        /// Directory-valued option (`--artifacts`): an existing directory is its normal target.
        var folder = false
        let arguments: @Sendable (_ target: String, _ work: String, _ recording: String) -> [String]
        var testDescription: String { name }
    }

    static let scenarioJSON = """
        {"version": 1, "name": "tiny", "seed": 7, "duration": 0.5,
         "devices": {"camera": {"device": "sim:back", "format": "640x480@30"}},
         "expectations": {"playable": true}}
        """

    static func scenario(in work: String) -> String {
        let path = work + "/tiny.json"
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: Data(scenarioJSON.utf8)) }
        return path
    }

    static let options: [Option] = [
        Option(name: "record OUTPUT", ext: "mp4", overwrite: false) { t, _, _ in
            ["record", "--camera", "sim:back", "--duration", "0.3", "--pace", "virtual", "--preset", "ultrafast", t] },
        Option(name: "record --metadata (OUTPUT.metadata.jsonl)", ext: "metadata.jsonl", overwrite: false) { t, _, _ in
            let movie = t.replacingOccurrences(of: ".metadata.jsonl", with: ".mp4")
            return ["record", "--camera", "sim:back", "--duration", "0.3", "--pace", "virtual", "--preset", "ultrafast", "--metadata", movie] },
        Option(name: "photo OUTPUT", ext: "jpg", overwrite: true) { t, _, _ in ["photo", "--camera", "sim:back", t] },
        Option(name: "fixture record OUT", ext: "nut", overwrite: false) { t, _, _ in
            ["fixture", "record", "--camera", "sim:back", "--duration", "0.3", "--pace", "virtual", t] },
        Option(name: "fixture record --movie", ext: "mp4", overwrite: false) { t, w, _ in
            ["fixture", "record", "--camera", "sim:back", "--duration", "0.3", "--pace", "virtual", "--movie", t, w + "/\(UUID().uuidString).nut"] },
        Option(name: "audio record OUT", ext: "wav", overwrite: true) { t, _, _ in
            ["audio", "record", "--microphone", "sim:mic", "--duration", "0.3", "--pace", "virtual", t] },
        Option(name: "inspect --contact-sheet", ext: "jpg", overwrite: true) { t, _, r in ["inspect", r, "--contact-sheet", t] },
        Option(name: "inspect --plot", ext: "png", overwrite: true) { t, _, r in ["inspect", r, "--plot", t] },
        Option(name: "test --junit", ext: "xml", overwrite: true) { t, w, _ in ["test", scenario(in: w), "--junit", t] },
        Option(name: "test --json", ext: "json", overwrite: true) { t, w, _ in ["test", scenario(in: w), "--json", t] },
        Option(name: "test --artifacts", ext: "d", overwrite: false, folder: true) { t, w, _ in ["test", scenario(in: w), "--artifacts", t] },
    ]

    /// Makes the hostile thing of `kind` at `path`; returns the extra path whose state must not change
    /// either (the symlink's target).
    static func make(_ kind: Kind, at path: String, recording: String) throws -> String? {
        switch kind {
        case .directory:
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            try Data("inside".utf8).write(to: URL(fileURLWithPath: path + "/inside.txt"))
        case .device:
            var null = stat()
            #expect(stat("/dev/null", &null) == 0)
            let made = mknod(path, S_IFCHR | 0o666, null.st_rdev)
            try #require(made == 0, "mknod \(path): \(String(cString: strerror(errno)))")
        case .fifo:
            try #require(mkfifo(path, 0o644) == 0)
        case .symlink:
            let victim = path + ".victim"
            try Data("the link's target, which must stay as it is".utf8).write(to: URL(fileURLWithPath: victim))
            try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: victim)
            return victim
        case .recording:
            try FileManager.default.copyItem(atPath: recording, toPath: path)
        }
        return nil
    }

    /// What is at `path`, without following a link: type, inode, device numbers, size, a content
    /// hash for a file, the link's text, a directory's entries (recursively).
    static func snapshot(_ path: String) -> String {
        var info = stat()
        guard lstat(path, &info) == 0 else { return "nothing" }
        var text = "mode \(String(info.st_mode, radix: 8)) inode \(info.st_ino) rdev \(info.st_rdev) size \(info.st_size)"
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            let data = FileManager.default.contents(atPath: path) ?? Data()
            text += " fnv \(data.reduce(UInt64(0xcbf2_9ce4_8422_2325)) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })"
        case S_IFLNK:
            text += " -> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?")
        case S_IFDIR:
            for child in ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() {
                text += "\n  \(child): " + snapshot(path + "/" + child).replacingOccurrences(of: "\n", with: "\n  ")
            }
        default: break
        }
        return text
    }

    static func refusal(_ result: TestSupport.ToolResult, _ path: String) -> Bool {
        result.status != 0 && result.stderr.contains(path)
            && ["exists there", "already exists", "never replaced", "not a directory"].contains { result.stderr.contains($0) }
    }

    @Test(arguments: options)
    func nothingAtTheOutputPathChangesUnlessOverwritingARegularFile(_ option: Option) async throws {
        let work = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let recording = work + "/source.mp4"
        let made = try await offPool(CommandLineTests.binary, ["record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "1",
                                                               "--pace", "virtual", "--preset", "ultrafast", recording])
        try #require(made.status == 0, "\(made.stderr)")
        for kind in Kind.allCases {
            let target = work + "/\(kind.rawValue).\(option.ext)"
            let extra = try Self.make(kind, at: target, recording: recording)
            let before = Self.snapshot(target), extraBefore = extra.map(Self.snapshot)
            let insideBefore = Self.snapshot(target + "/inside.txt")
            let plain = try await offPool(CommandLineTests.binary, option.arguments(target, work, recording))
            if option.folder, kind == .directory {
                // A folder option's own kind: used, and only new entries appear inside it.
                #expect(plain.status == 0, "\(option.name) → \(kind): \(plain.stderr)")
                #expect(Self.snapshot(target + "/inside.txt") == insideBefore)
                let entries = try FileManager.default.contentsOfDirectory(atPath: target).sorted()
                #expect(entries == ["inside.txt", "tiny"], "\(entries)")
                continue
            }
            #expect(Self.refusal(plain, target), "\(option.name) → \(kind): exit \(plain.status), \(plain.stderr)")
            #expect(Self.snapshot(target) == before, "\(option.name) changed the \(kind) at the path")
            #expect(extra.map(Self.snapshot) == extraBefore, "\(option.name) changed the symlink's target")
            guard option.overwrite else { continue }
            let forced = try await offPool(CommandLineTests.binary, option.arguments(target, work, recording) + ["--overwrite"])
            if kind == .recording {
                // The one replaceable kind: a regular file again, new content, a new inode (renamed
                // over, never truncated in place), no temporary left beside it.
                #expect(forced.status == 0, "\(option.name) --overwrite: \(forced.stderr)")
                var old = stat(), new = stat()
                #expect(lstat(recording, &old) == 0 && lstat(target, &new) == 0)
                #expect(new.st_mode & S_IFMT == S_IFREG && Self.snapshot(target) != before, "\(option.name) did not replace the file")
                #expect(new.st_size > 0)
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: work).filter { $0.hasSuffix(".tmp") }
                #expect(leftovers.isEmpty, "\(leftovers)")
            } else {
                #expect(Self.refusal(forced, target), "\(option.name) --overwrite → \(kind): exit \(forced.status), \(forced.stderr)")
                #expect(Self.snapshot(target) == before, "\(option.name) --overwrite changed the \(kind) at the path")
                #expect(extra.map(Self.snapshot) == extraBefore, "\(option.name) --overwrite changed the symlink's target")
            }
        }
    }

    /// An output is never one of the command's inputs, even with `--overwrite`: the contact sheet or
    /// plot over the recording inspected, the JSON report over the scenario being run.
    @Test func anOutputNeverReplacesTheCommandsOwnInput() async throws {
        let work = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let recording = work + "/source.mp4"
        let made = try await offPool(CommandLineTests.binary, ["record", "--camera", "sim:back", "--duration", "0.5", "--pace", "virtual",
                                                               "--preset", "ultrafast", recording])
        try #require(made.status == 0, "\(made.stderr)")
        let scenario = Self.scenario(in: work)
        for arguments in [["inspect", recording, "--contact-sheet", recording, "--overwrite"], ["inspect", recording, "--plot", recording, "--overwrite"],
                          ["test", scenario, "--json", scenario, "--overwrite"], ["test", work, "--junit", scenario, "--overwrite"]] {
            let input = arguments[1] == work ? scenario : arguments[1]
            let before = Self.snapshot(input)
            let result = try await offPool(CommandLineTests.binary, arguments)
            #expect(result.status != 0 && result.stderr.contains("never replaced"), "\(arguments): \(result.stderr)")
            #expect(Self.snapshot(input) == before, "\(arguments) changed its input")
        }
        // Two outputs of one command on one path (spelt differently): refused before anything runs.
        for arguments in [["test", scenario, "--junit", work + "/r.xml", "--json", work + "/./r.xml"],
                          ["inspect", recording, "--contact-sheet", work + "/s.png", "--plot", work + "//s.png"]] {
            let result = try await offPool(CommandLineTests.binary, arguments)
            #expect(result.status != 0 && result.stderr.contains("name the same file"), "\(arguments): \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: work + "/r.xml") && !FileManager.default.fileExists(atPath: work + "/s.png"))
        }
    }

    /// A writer that opens its claimed file by name again (libavformat) goes through the descriptor:
    /// a symlink swapped in at the path after the claim is not written through.
    @Test func theClaimedFileIsReopenedThroughItsDescriptorNotItsName() throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/out.nut", victim = dir + "/victim.txt"
        try Data("victim".utf8).write(to: URL(fileURLWithPath: victim))
        let fd = try OutputPath.claimKeepingOpen(path)
        defer { close(fd) }
        // Someone swaps the new file for a link to another file.
        #expect(unlink(path) == 0)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: victim)
        let reopened = open(OutputPath.openPath(fd), O_WRONLY | O_CREAT | O_TRUNC, 0o644)  // as avio_open does
        try #require(reopened >= 0)
        #expect(write(reopened, "payload", 7) == 7)
        close(reopened)
        var claimed = stat()
        #expect(fstat(fd, &claimed) == 0 && claimed.st_size == 7)
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "victim")
    }
}
