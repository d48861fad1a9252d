import ArgumentParser
import CaptureKit
import CaptureKitTesting
import Foundation

struct TestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run scenario files (devices, faults, expectations) in virtual time (real time on a --camera /dev/videoN) and report which expectations failed.",
        discussion: """
            Each SCENARIO is a JSON scenario file or a folder of them (Simulator/Scenarios/README.md documents the \
            format): simulated devices, a controls timeline, a fault timeline (drops, jitter, stalls, corrupt frames, \
            unplug, audio gaps, drift, interruptions, disk full…) and the expectations on what comes out. Scenarios \
            run in parallel (--jobs) in virtual time; the exit status is 1 when any expectation fails, and each failure \
            names the scenario, the expectation and the measured value. --shard I/N runs the I-th of N stable shards \
            (by scenario name), so N CI jobs together run the whole set once. --junit writes JUnit XML, --json the \
            measurements, --artifacts DIR keeps per scenario DIR/NAME/ (NAME made one safe path component, \
            with -2, -3… when taken, so runs and same-named scenarios never share a folder): the movie, inspect.json, contact-sheet.jpg, \
            av-offset.png and result.json. --camera runs the same files on another camera: on a V4L2 one (vivid in \
            the VM) in real time, its unplug and bufferError faults pressed through vivid's error-injection controls.
            """)

    @Argument(help: "Scenario files (.json) or folders of them.")
    var scenarios: [String]

    @Option(help: "Write a JUnit XML report here.")
    var junit: String?

    @Option(help: "Write the results (measurements and expectations) as JSON here.")
    var json: String?

    @Option(help: "Keep each scenario's movie, inspect report, contact sheet, A/V offset plot and result in DIR/NAME/.")
    var artifacts: String?

    @Flag(help: "Replace --junit and --json files that exist, if they are regular files (atomically); a folder, link, FIFO or device there is never replaced, and a scenario being run never.")
    var overwrite = false

    @Option(help: "Scenarios run at once.")
    var jobs: Int = 2

    @Option(help: "I/N: run only the I-th of N shards (stable assignment by scenario name).")
    var shard: String?

    @Option(help: ArgumentHelp("Run every scenario with this camera instead of its own (e.g. /dev/video0).",
                               discussion: "A V4L2 camera runs in real time; its unplug and bufferError faults are pressed through vivid's error-injection controls."))
    var camera: String?

    func validate() throws {
        guard (1...64).contains(jobs) else { throw ValidationError("--jobs must be 1…64") }
        if let junit, let json, samePath(junit, json) {
            throw ValidationError("--junit and --json name the same file (\(junit)); give each its own")
        }
        if let shard, Self.parseShard(shard) == nil { throw ValidationError("--shard must look like I/N with 1 ≤ I ≤ N, e.g. 2/3, not '\(shard)'") }
    }

    static func parseShard(_ text: String) -> (index: Int, count: Int)? {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 2, let i = Int(parts[0]), let n = Int(parts[1]), n >= 1, (1...n).contains(i) else { return nil }
        return (i, n)
    }

    func run() async throws {
        // The runner reports what it measures; libav's own complaints (a damaged frame) are noise here.
        MediaFileReader.silenceLibraryLogs()
        let files: [String]
        do { files = try Scenario.files(in: scenarios) } catch { throw CommandFailure(error) }
        // Shard by the scenario's name (its "name", else the file's base name).
        var selected: [String] = []
        for file in files {
            if let (index, count) = shard.flatMap(Self.parseShard) {
                let name = (try? Scenario.load(path: file).name) ?? ((file as NSString).lastPathComponent as NSString).deletingPathExtension
                guard ScenarioRunner.shard(of: name, count: count) == index else { continue }
            }
            selected.append(file)
        }
        if selected.isEmpty {
            printError("capture test: no scenarios to run" + (shard.map { " in shard \($0)" } ?? ""))
        }
        // Outputs are checked before anything runs: refused at once, and never one of the inputs.
        for report in [junit, json].compactMap({ $0 }) {
            do { try OutputPath.checkNew(report, existing: .init(overwrite: overwrite)) } catch { throw CommandFailure(error, overwritable: true) }
            if let input = (files + scenarios).first(where: { OutputPath.isSameFile(report, $0) }) {
                throw CommandFailure(.outputNotReplaceable(path: report, kind: "the scenario \(input), an input of this run"))
            }
        }
        if let artifacts {
            do { try OutputPath.prepareFolder(artifacts) } catch { throw CommandFailure(error) }
        }
        let progress = Progress(total: selected.count, terminal: isatty(STDOUT_FILENO) == 1)
        let started = Date()
        let options = ScenarioRunner.Options(artifactsDirectory: artifacts, camera: camera)
        var results = [ScenarioResult?](repeating: nil, count: selected.count)
        await withTaskGroup(of: (Int, ScenarioResult).self) { group in
            var next = 0
            // One real camera serves one scenario at a time.
            let jobs = camera?.hasPrefix("/dev/") == true ? 1 : self.jobs
            while next < min(jobs, selected.count) {
                let i = next, file = selected[i]
                group.addTask { (i, await ScenarioRunner.run(file: file, options: options)) }
                next += 1
            }
            for await (i, result) in group {
                results[i] = result
                progress.finished(result)
                if next < selected.count {
                    let j = next, file = selected[j]
                    group.addTask { (j, await ScenarioRunner.run(file: file, options: options)) }
                    next += 1
                }
            }
        }
        let done = results.compactMap { $0 }
        progress.end(wall: Date().timeIntervalSince(started))
        for (path, text) in [(junit, { ScenarioReport.junit(done) }), (json, { ScenarioReport.json(done) })] {
            guard let path else { continue }
            do { try OutputPath.write(text(), to: path, existing: .init(overwrite: overwrite)) } catch { throw CommandFailure(error, overwritable: true) }
        }
        if done.contains(where: { !$0.passed }) { throw ExitCode(1) }
    }
}

/// Progress: on a terminal one line rewritten in place (done/total, failures so far), otherwise a
/// plain line per finished scenario. Failures are printed in full either way.
final class Progress: Sendable {
    let total: Int
    let terminal: Bool
    private let counts = Locked((done: 0, failed: 0))

    init(total: Int, terminal: Bool) {
        self.total = total
        self.terminal = terminal
    }

    // Called from the task group's consuming loop only (one at a time).
    func finished(_ result: ScenarioResult) {
        let (done, failed) = counts.withLock { c in
            c.done += 1
            if !result.passed { c.failed += 1 }
            return c
        }
        let status = result.passed ? "PASS" : "FAIL"
        let line = "[\(done)/\(total)] \(status) \(result.name) (\(String(format: "%.1f", result.wallSeconds)) s)"
        if terminal {
            // Clear the status line, print failures for good, then redraw the status line.
            if !result.passed {
                print("\r\u{1B}[2K" + line)
                for message in result.failureMessages { print("  " + message) }
            }
            let skipped = result.expectations.filter(\.skipped)
            for s in skipped { print("\r\u{1B}[2K  \(result.name): \(s.name) \(s.measured)") }
            print("\r\u{1B}[2K\(done)/\(total) done, \(failed) failed — last: \(result.name) \(status)", terminator: "")
            fflush(nil)  // all streams: stdout is a C global Swift 6 will not touch
        } else {
            print(line)
            for message in result.failureMessages { print("  " + message) }
            for s in result.expectations where s.skipped { print("  \(result.name): \(s.name) \(s.measured)") }
        }
    }

    func end(wall: Double) {
        let failed = counts.withLock { $0.failed }
        if terminal { print("\r\u{1B}[2K", terminator: "") }
        print("\(total) scenarios, \(failed) failed, in \(String(format: "%.1f", wall)) s")
    }
}
