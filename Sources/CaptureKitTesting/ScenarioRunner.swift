import CaptureKit
import Foundation

/// The result of one expectation: what was asked, what was measured, and whether they agree.
public struct ExpectationResult: Sendable, Codable, Hashable {
    public var name: String
    public var expected: String
    public var measured: String
    public var passed: Bool
    /// True when the check could not run here (GStreamer not installed): counted as passed.
    public var skipped: Bool = false
}

/// One scenario run: its measurements and each expectation's outcome.
public struct ScenarioResult: Sendable, Codable {
    /// What the run measured, as the expectations read it.
    public struct Measured: Sendable, Codable {
        public var frames: Int
        public var deliveredFrames: Int
        public var missingFrames: [Int]
        public var duplicatedFrames: [Int]
        public var maxAVOffset: Double?
        public var stopReason: String?
        public var errors: [CaptureHarness.DeliveredError]
        public var metadata: [String: Int]
        public var audioFrequency: Double?
        public var audioLevel: Double?
        public var audioGapMilliseconds: Double
        public var jitterMicroseconds: Double
        public var invalidFramesSkipped: Int
        public var damagedFrames: Int
        public var fileSize: Int64?
    }

    public var name: String
    public var file: String
    /// Empty when the scenario could not be loaded or run (then `problem` says why).
    public var expectations: [ExpectationResult]
    public var measured: Measured?
    /// A failure before any expectation could be checked (a malformed file, a device refused).
    public var problem: String?
    public var wallSeconds: Double
    /// Files written under `--artifacts` (paths).
    public var artifacts: [String] = []

    public var passed: Bool { problem == nil && expectations.allSatisfy(\.passed) }
    /// One line per failed expectation: `SCENARIO: EXPECTATION: expected X, measured Y`.
    public var failureMessages: [String] {
        if let problem { return ["\(name): \(problem)"] }
        return expectations.filter { !$0.passed }.map { "\(name): \($0.name): expected \($0.expected), measured \($0.measured)" }
    }
}

/// Runs scenarios in virtual time and checks their expectations.
public enum ScenarioRunner {
    /// Options of a run.
    public struct Options: Sendable {
        /// Folder for per-scenario artifacts (DIR/NAME/: movie, inspect report, contact sheet); nil:
        /// movies go to a scratch folder and are removed.
        public var artifactsDirectory: String?
        public var scratchDirectory: String = NSTemporaryDirectory()
        /// Run every scenario with this camera instead of its own (`capture test --camera`): the
        /// same file on a real V4L2 camera (then in real time, its faults pressed through vivid's
        /// error-injection controls).
        public var camera: String?
        public init(artifactsDirectory: String? = nil, camera: String? = nil) {
            self.artifactsDirectory = artifactsDirectory
            self.camera = camera
        }
    }

    /// Which of `shardCount` shards (1-based `shard`) a scenario belongs to: FNV-1a of its name, so
    /// the assignment is stable across machines and runs, and the shards partition the set.
    public static func shard(of name: String, count: Int) -> Int {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return Int(h % UInt64(max(count, 1))) + 1
    }

    /// Loads and runs one scenario file; a malformed file is a failed result naming the problem.
    public static func run(file: String, options: Options = Options()) async -> ScenarioResult {
        let start = Date()
        let scenario: Scenario
        do {
            scenario = try Scenario.load(path: file)
        } catch {
            let name = ((file as NSString).lastPathComponent as NSString).deletingPathExtension
            return ScenarioResult(name: name, file: file, expectations: [], problem: "\(error)", wallSeconds: Date().timeIntervalSince(start))
        }
        return await run(scenario, options: options)
    }

    /// The harness configuration a scenario describes (the movie at `moviePath`).
    public static func configuration(for s: Scenario, moviePath: String?) -> CaptureHarness.Configuration {
        var c = CaptureHarness.Configuration()
        c.seed = s.seed
        c.pace = s.pace
        c.camera = s.camera?.uniqueID
        c.cameraFormat = s.camera?.format
        c.cameraControls = s.camera?.controls ?? []
        c.controlTimeline = s.controls
        c.microphone = s.microphone?.uniqueID
        c.faults = s.faults
        c.moviePath = s.outputs.movieContainer == nil ? nil : moviePath
        c.movieCodec = s.outputs.movieCodec
        c.movieFragmentInterval = s.outputs.fragmentInterval
        c.videoData = s.outputs.videoData
        c.audioData = s.outputs.audioData
        c.metadataTypes = s.outputs.metadataTypes.compactMap { MetadataObjectType(name: $0) }
        return c
    }

    /// Runs a scenario: records `duration` seconds of virtual time, then measures and checks.
    public static func run(_ scenario: Scenario, options: Options = Options()) async -> ScenarioResult {
        let start = Date()
        var s = scenario
        if let camera = options.camera { s.replaceCamera(with: camera) }
        var result = ScenarioResult(name: s.name, file: s.file, expectations: [], problem: nil, wallSeconds: 0)
        // The scenario's name is data, not a path: made one safe component, in a folder of its own
        // that no other run or same-named scenario shares (DIR/NAME, DIR/NAME-2, …).
        let folder: String
        do throws(CaptureError) {
            if let dir = options.artifactsDirectory {
                try OutputPath.prepareFolder(dir)
                folder = try OutputPath.makeUniqueFolder(in: dir, named: s.name)
            } else {
                folder = try OutputPath.makeUniqueFolder(in: options.scratchDirectory,
                                                         named: "capture-test-\(getpid())-\(UUID().uuidString.prefix(8))-\(s.name)")
            }
        } catch {
            result.problem = "cannot create the scenario's folder: \(error)"
            result.wallSeconds = Date().timeIntervalSince(start)
            return result
        }
        defer { if options.artifactsDirectory == nil { try? FileManager.default.removeItem(atPath: folder) } }
        let moviePath = (folder as NSString).appendingPathComponent("movie.\(s.outputs.movieContainer ?? "mp4")")

        let harness: CaptureHarness
        do {
            harness = try CaptureHarness(configuration(for: s, moviePath: moviePath))
        } catch {
            result.problem = "cannot set up: \(error)"
            result.wallSeconds = Date().timeIntervalSince(start)
            return result
        }
        do throws(CaptureError) {
            try await harness.start()
            // Steps of 100 ms: errors are stamped close to when they happened.
            let step = 0.1
            var t = 0.0
            while t < s.duration - 1e-9 {
                let d = min(step, s.duration - t)
                do {
                    try await harness.advance(by: d)
                } catch {
                    if case .sessionNotRunning = error { break }  // the devices ended the run (unplug, revoked access)
                    throw error
                }
                t += d
            }
        } catch {
            // A start the devices refused is among the harness's errors; any other failure is the run's
            // problem. A format the device lacks (a fixture recorded in another) is the setup's, always said.
            if case .formatNotSupported = error {
                result.problem = "cannot set up: \(error)"
            } else if !harness.errors.contains(where: { $0.message == error.description }) {
                result.problem = "the run failed: \(error)"
            }
        }
        let recording = await harness.finish()
        let measured = measure(recording)
        result.measured = measured
        result.expectations = check(s.expectations, measured: measured, recording: recording)
        if options.artifactsDirectory != nil, let path = recording.path, FileManager.default.fileExists(atPath: path) {
            result.artifacts = writeArtifacts(folder: folder, moviePath: path, result: result)
        }
        result.wallSeconds = Date().timeIntervalSince(start)
        return result
    }

    static func measure(_ r: CaptureHarness.Recording) -> ScenarioResult.Measured {
        ScenarioResult.Measured(
            frames: r.frameCount, deliveredFrames: r.delivered.frameCount, missingFrames: r.missingFrames,
            duplicatedFrames: r.analysis?.duplicatedIndices ?? r.delivered.duplicatedFrames.map { Int($0) },
            maxAVOffset: r.maximumAVOffset, stopReason: r.stopReason, errors: r.errors, metadata: r.delivered.metadataObjects,
            audioFrequency: r.dominantFrequency, audioLevel: r.audioLevelDBFS, audioGapMilliseconds: r.delivered.audioGapMilliseconds,
            jitterMicroseconds: r.delivered.maximumJitterMicroseconds(frameDuration: r.frameDuration),
            invalidFramesSkipped: r.summary?.invalidFramesSkipped ?? 0, damagedFrames: r.damagedFrames, fileSize: r.summary?.fileSize)
    }

    static func list(_ values: [Int]) -> String { values.isEmpty ? "none" : "[" + values.map(String.init).joined(separator: ", ") + "]" }

    static func number(_ v: Double?, unit: String = "") -> String {
        guard let v else { return "nothing (not measurable)" }
        return String(format: "%g", (v * 1e6).rounded() / 1e6) + unit
    }

    /// Checks each stated expectation against the measurements.
    static func check(_ e: Scenario.Expectations, measured m: ScenarioResult.Measured, recording r: CaptureHarness.Recording) -> [ExpectationResult] {
        var out: [ExpectationResult] = []
        func add(_ name: String, _ expected: String, _ measured: String, _ passed: Bool, skipped: Bool = false) {
            out.append(ExpectationResult(name: name, expected: expected, measured: measured, passed: passed, skipped: skipped))
        }
        func range(_ name: String, _ r: Scenario.Range?, _ value: Double?, unit: String = "") {
            guard let r else { return }
            add(name, "\(r)\(unit)", number(value, unit: unit), value.map(r.contains) ?? false)
        }
        range("frames", e.frames, Double(m.frames))
        range("deliveredFrames", e.deliveredFrames, Double(m.deliveredFrames))
        if let want = e.missingFrames { add("missingFrames", list(want), list(m.missingFrames), want == m.missingFrames) }
        if let want = e.duplicatedFrames { add("duplicatedFrames", list(want), list(m.duplicatedFrames), want == m.duplicatedFrames) }
        if let limit = e.maxAVOffset {
            add("maxAVOffset", "≤ \(number(limit)) s", m.maxAVOffset.map { "\(number($0)) s" } ?? "no sync marker with both sides",
                (m.maxAVOffset ?? .infinity) <= limit + 1e-9)
        }
        if let want = e.stopReason { add("stopReason", want, m.stopReason ?? "no recording", m.stopReason == want) }
        if let want = e.playable {
            let probe = r.path.map(ffprobe) ?? "no movie"
            add("playable", want ? "ffprobe decodes every stream" : "not playable", probe, (probe == "ok") == want)
        }
        if let want = e.gstreamer {
            if let path = r.path, let gst = gstreamer(path) {
                add("gstreamer", want ? "gst-discoverer-1.0 reads it" : "GStreamer refuses it", gst, (gst == "ok") == want)
            } else {
                add("gstreamer", want ? "gst-discoverer-1.0 reads it" : "GStreamer refuses it", "skipped: gst-discoverer-1.0 is not installed", true, skipped: true)
            }
        }
        if let want = e.errors {
            let got = m.errors
            var ok = want.count == got.count
            if ok {
                for (w, g) in zip(want, got) where w.type != g.type || (w.at.map { abs($0 - g.pts) > w.tolerance + 1e-9 } ?? false) { ok = false }
            }
            let expected = want.isEmpty ? "none" : want.map { w in w.type + (w.at.map { " at \(number($0)) s ± \(number(w.tolerance)) s" } ?? "") }.joined(separator: ", ")
            let measured = got.isEmpty ? "none" : got.map { "\($0.type) at \(number($0.pts)) s" }.joined(separator: ", ")
            add("errors", expected, measured, ok)
        }
        for (type, r) in (e.metadata ?? [:]).sorted(by: { $0.key < $1.key }) {
            range("metadata.\(type)", r, Double(m.metadata[type] ?? 0))
        }
        range("audio.frequency", e.audioFrequency, m.audioFrequency, unit: " Hz")
        range("audio.level", e.audioLevel, m.audioLevel, unit: " dBFS")
        range("audio.gapMilliseconds", e.audioGapMilliseconds, m.audioGapMilliseconds, unit: " ms")
        range("jitterMicroseconds", e.jitterMicroseconds, m.jitterMicroseconds, unit: " µs")
        range("invalidFramesSkipped", e.invalidFramesSkipped, Double(m.invalidFramesSkipped))
        range("damagedFrames", e.damagedFrames, Double(m.damagedFrames))
        return out
    }

    /// "ok" when ffprobe reads the file and decodes frames of every stream; otherwise what it said.
    public static func ffprobe(_ path: String) -> String {
        guard let result = runTool("ffprobe", ["-v", "error", "-count_frames", "-show_streams", "-of", "json", path]) else {
            return "ffprobe could not be run"
        }
        guard result.status == 0,
              let json = try? JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
              let streams = json["streams"] as? [[String: Any]], !streams.isEmpty else {
            return "ffprobe failed (status \(result.status)): \(result.stderr.prefix(200))"
        }
        let empty = streams.filter { Int(($0["nb_read_frames"] as? String) ?? "0") ?? 0 == 0 }
        if !empty.isEmpty { return "\(empty.count) of \(streams.count) streams decode no frames" }
        // Decoder complaints about single frames do not make a file unplayable (a damaged MJPEG
        // frame copied as is): the result says so in the report, the check passes.
        return "ok"
    }

    /// "ok" when gst-discoverer-1.0 reads the file; nil when GStreamer is not installed.
    public static func gstreamer(_ path: String) -> String? {
        guard let which = runTool("sh", ["-c", "command -v gst-discoverer-1.0"]), which.status == 0 else { return nil }
        guard let result = runTool("timeout", ["-k", "5", "60", "gst-discoverer-1.0", path]) else { return nil }
        if result.status == 0 && !result.stdout.contains("An error was encountered") {
            return result.stdout.lowercased().contains("video") || result.stdout.lowercased().contains("audio") ? "ok" : "no streams found"
        }
        return "gst-discoverer-1.0 failed (status \(result.status)): \(result.stdout.suffix(200))"
    }

    struct ToolResult { var status: Int32; var stdout: String; var stderr: String }

    /// Runs a tool and waits (call off the cooperative pool: the runner's scenarios run on threads).
    static func runTool(_ tool: String, _ arguments: [String]) -> ToolResult? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [tool] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        do { try process.run() } catch { return nil }
        let errData = Locked(Data())
        let readerDone = DispatchSemaphore(value: 0)
        let reader = Thread {
            errData.withLock { $0 = err.fileHandleForReading.readDataToEndOfFile() }
            readerDone.signal()
        }
        reader.start()
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        readerDone.wait()  // the reader's end (the pipe closed with the process)
        return ToolResult(status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
                          stderr: errData.withLock { String(decoding: $0, as: UTF8.self) })
    }

    /// DIR/NAME/ (NAME made safe and unique): the movie (already there), inspect.json (RecordingInspector), contact-sheet.jpg,
    /// av-offset.png (the A/V offset at each sync marker and the frame intervals), result.json.
    static func writeArtifacts(folder: String, moviePath: String, result: ScenarioResult) -> [String] {
        var written = [moviePath]
        let sheet = (folder as NSString).appendingPathComponent("contact-sheet.jpg")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let plot = (folder as NSString).appendingPathComponent("av-offset.png")
        var options = RecordingInspector.Options(contactSheetPath: sheet)
        options.plotPath = plot
        if let report = try? RecordingInspector.inspect(path: moviePath, options: options) {
            let path = (folder as NSString).appendingPathComponent("inspect.json")
            if let data = try? encoder.encode(report), (try? OutputPath.write(Array(data), to: path)) != nil { written.append(path) }
            for file in [sheet, plot] where FileManager.default.fileExists(atPath: file) { written.append(file) }
        }
        let path = (folder as NSString).appendingPathComponent("result.json")
        if let data = try? encoder.encode(result), (try? OutputPath.write(Array(data), to: path)) != nil { written.append(path) }
        return written
    }
}

/// Reports of a set of results: JUnit XML and JSON.
public enum ScenarioReport {
    /// JUnit XML (testsuites > testsuite > testcase, with a `failure` per failed scenario naming
    /// each failed expectation and its measured value; skipped checks as `system-out`).
    public static func junit(_ results: [ScenarioResult], suiteName: String = "capture test") -> String {
        let failures = results.filter { !$0.passed }.count
        let total = results.reduce(0) { $0 + $1.wallSeconds }
        var x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        x += "<testsuites name=\"\(escape(suiteName))\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"0\" time=\"\(seconds(total))\">\n"
        x += "  <testsuite name=\"\(escape(suiteName))\" tests=\"\(results.count)\" failures=\"\(failures)\" errors=\"0\" skipped=\"0\" time=\"\(seconds(total))\">\n"
        for r in results {
            // classname: the scenario's folder (the attributes of the common JUnit schema only).
            let folder = (r.file as NSString).deletingLastPathComponent
            x += "    <testcase classname=\"\(escape(folder.isEmpty ? "scenarios" : folder))\" name=\"\(escape(r.name))\" time=\"\(seconds(r.wallSeconds))\""
            let notes = r.expectations.filter(\.skipped).map { "\($0.name): \($0.measured)" }
            if r.passed && notes.isEmpty { x += "/>\n"; continue }
            x += ">\n"
            if !r.passed {
                let messages = r.failureMessages
                x += "      <failure message=\"\(escape(messages.first ?? "failed"))\" type=\"ExpectationFailed\">\(escape(messages.joined(separator: "\n")))</failure>\n"
            }
            if !notes.isEmpty { x += "      <system-out>\(escape(notes.joined(separator: "\n")))</system-out>\n" }
            x += "    </testcase>\n"
        }
        x += "  </testsuite>\n</testsuites>\n"
        return x
    }

    public static func json(_ results: [ScenarioResult]) -> String {
        struct Document: Codable { var scenarios: Int; var failed: Int; var results: [ScenarioResult] }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let doc = Document(scenarios: results.count, failed: results.filter { !$0.passed }.count, results: results)
        return String(decoding: (try? encoder.encode(doc)) ?? Data(), as: UTF8.self)
    }

    static func seconds(_ v: Double) -> String { String(format: "%.3f", v) }

    static func escape(_ s: String) -> String {
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "\n": out += "&#10;"
            case "\t", "\r": out += "&#\(scalar.value);"
            default:
                // XML 1.0 forbids other control characters.
                if scalar.value < 0x20 || (0xFFFE...0xFFFF).contains(scalar.value) { out += "?" } else { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }
}
