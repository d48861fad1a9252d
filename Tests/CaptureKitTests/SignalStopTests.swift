import CaptureKit
import Foundation
import Testing

/// The `capture` tool, as a separate process, on SIGINT, SIGTERM, SIGHUP and SIGQUIT: `record`
/// finishes a playable movie and `fixture record` a readable fixture with the buffers it took,
/// exit 0 (StopSignals). Each signal is sent once the tool says it is recording (its own stderr
/// line, awaited with a deadline). Serialized: each case runs the real tool, some in real time.
@Suite(.serialized) struct SignalStopTests {
    static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    static func name(_ signal: Int32) -> String {
        [SIGINT: "SIGINT", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP", SIGQUIT: "SIGQUIT"][signal] ?? "\(signal)"
    }

    static func json(_ text: String) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not JSON: \(text)")
    }

    @Test(arguments: signals)
    func recordFinishesAPlayableMovie(on signal: Int32) async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/signalled.mp4"
        // Real-time pace and an hour: still recording when the signal lands, however loaded the
        // machine, and using a frame period's work per frame meanwhile (a virtual-pace hour would
        // encode flat out on both cores while this test waits for its turn). Unfragmented
        // (--fragment-interval 0): only a finished file has its index and plays.
        let tool = try CaptureToolProcess(["record", "--camera", "sim:back", "--microphone", "sim:mic", "--duration", "3600",
                                           "--size", "640x480", "--pace", "realtime", "--fragment-interval", "0",
                                           "--preset", "ultrafast", "--progress", "--json", path])
        try await tool.waitForStderrLine("'capture: recording to …'") { $0.hasPrefix("capture: recording to ") }
        // A status line (one a second) counting 10 frames or more: both tracks have media by then.
        try await tool.waitForStderrLine("with frame= ≥ 10") { Self.frames(inStatus: $0) ?? 0 >= 10 }
        tool.send(signal)
        let exit = try await tool.exit()
        // The tool's own code: 0, the recording finished as asked (not 128 + signal, not a crash).
        #expect(exit.reason == .exit && exit.status == 0, "\(Self.name(signal)): \(exit.reason) \(exit.status)\n\(exit.stderr)")
        #expect(exit.stderr.contains("capture: \(Self.name(signal)) received: finishing"), "\(exit.stderr)")
        #expect(!exit.stderr.contains("Crash") && !exit.stderr.contains("Backtrace"), "\(exit.stderr)")
        let recording = try #require(try Self.json(exit.stdout)["recording"] as? [String: Any])
        #expect(recording["stopReason"] as? String == "requested")
        #expect(recording["fileIsUsable"] as? Bool == true)
        #expect(recording["videoFrames"] as? Int ?? 0 > 0)

        // An independent reader: both streams, a duration, and a decode without a complaint.
        let streams = try TestSupport.probeStreams(path)
        #expect(streams.compactMap { $0["codec_name"] as? String } == ["h264", "aac"], "\(streams)")
        let format = try TestSupport.run("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        let duration = Double(format.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(format.status == 0 && duration > 0, "\(format.stdout)\(format.stderr)")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
    }

    @Test(arguments: signals)
    func fixtureRecordKeepsTheBuffersItTook(on signal: Int32) async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/signalled.nut"
        // Real time, ten minutes: the signal lands mid-recording. MJPEG frames are stored as they
        // come (no FFV1 coding), so a loaded machine keeps up.
        let tool = try CaptureToolProcess(["fixture", "record", "--camera", "sim:webcam", "--format", "640x480@30:MJPG",
                                           "--duration", "600", "--pace", "realtime", "--progress", "--json", path])
        try await tool.waitForStderrLine("'capture: recording fixture to …'") { $0.hasPrefix("capture: recording fixture to ") }
        // A status line (one a second) that counts at least 3 frames taken.
        let status = try await tool.waitForStderrLine("with frame= ≥ 3") { Self.frames(inStatus: $0) ?? 0 >= 3 }
        let seen = try #require(Self.frames(inStatus: Substring(status)))
        tool.send(signal)
        let exit = try await tool.exit()
        #expect(exit.reason == .exit && exit.status == 0, "\(Self.name(signal)): \(exit.reason) \(exit.status)\n\(exit.stderr)")
        #expect(exit.stderr.contains("capture: \(Self.name(signal)) received: finishing"), "\(exit.stderr)")
        let summary = try Self.json(exit.stdout)
        #expect(summary["stopReason"] as? String == "requested")
        let buffers = try #require((summary["buffers"] as? [Int])?.first)
        #expect(buffers >= seen, "the fixture holds \(buffers) frames; \(seen) were counted before the signal")

        // `capture fixture info` reads it whole: the end record is there, and so is every frame.
        let info = try TestSupport.run(CommandLineTests.binary, ["fixture", "info", "--json", path])
        #expect(info.status == 0, "\(info.stderr)")
        let camera = try #require((try Self.json(info.stdout)["devices"] as? [[String: Any]])?.first)
        #expect(camera["buffers"] as? Int == buffers)
        let first = try #require(camera["firstPTS"] as? Double), last = try #require(camera["lastPTS"] as? Double)
        #expect(last - first >= Double(seen - 1) / 30 - 0.001, "\(first)…\(last) for \(buffers) frames")
    }

    @Test(arguments: signals)
    func audioRecordFinishesAPlayableFile(on signal: Int32) async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/signalled.wav"
        let tool = try CaptureToolProcess(["audio", "record", "--microphone", "sim:mic", "--duration", "600", "--pace", "realtime",
                                           "--progress", path])
        // A status line (one a second) past half a second of media.
        try await tool.waitForStderrLine("with time= ≥ 0.5 s") { Self.seconds(inStatus: $0) ?? 0 >= 0.5 }
        tool.send(signal)
        let exit = try await tool.exit()
        #expect(exit.reason == .exit && exit.status == 0, "\(Self.name(signal)): \(exit.reason) \(exit.status)\n\(exit.stderr)")
        #expect(exit.stderr.contains("capture: \(Self.name(signal)) received: finishing"), "\(exit.stderr)")
        #expect(exit.stdout.hasPrefix("recorded "), "\(exit.stdout)")
        let streams = try TestSupport.probeStreams(path)
        #expect(streams.compactMap { $0["codec_name"] as? String } == ["pcm_s16le"], "\(streams)")
        let format = try TestSupport.run("ffprobe", ["-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", path])
        #expect((Double(format.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0) >= 0.5, "\(format.stdout)")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
    }

    /// What a signal before the fixture is armed comes to (`fixture record` checks for one in
    /// `started`): stopped at once, `record(to:)` still returns the summary and the fixture is
    /// finished — no "ended before it was awaited" failure.
    @Test func aFixtureStoppedAsSoonAsItIsArmedIsFinished() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let registry = CaptureKit.makeRegistry(seed: 7)
        let session = CaptureSession(pace: .virtual)
        try session.addInput(CaptureDeviceInput(device: registry.device(uniqueID: "sim:webcam")))
        let fixture = FixtureRecordingOutput()
        try session.addOutput(fixture)
        try session.startRunning()
        defer { session.stopRunning() }
        let summary = try await fixture.record(to: dir + "/armed.nut") { _ = try? fixture.stopRecording() }
        #expect(summary.stopReason == "requested")
        #expect(!fixture.isRecording)
        let info = try TestSupport.run(CommandLineTests.binary, ["fixture", "info", "--json", dir + "/armed.nut"])
        #expect(info.status == 0, "\(info.stderr)")
        #expect((try Self.json(info.stdout)["devices"] as? [[String: Any]])?.first?["buffers"] as? Int == summary.buffers.first)
    }

    /// Standard error is a pipe nobody reads any more (`capture record … 2>&1 | head -1`): the
    /// start and status lines fail with EPIPE (SIGPIPE is ignored), the recording is finished.
    @Test func aClosedStandardErrorDoesNotCostTheRecording() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/closed-stderr.mp4"
        let script = """
            import os, subprocess, sys
            r, w = os.pipe(); os.close(r)
            p = subprocess.run(sys.argv[1:], stderr=w, stdout=subprocess.PIPE, timeout=300)
            print(p.returncode)
            """
        let result = try await offPool("python3", ["-c", script, CommandLineTests.binary, "record", "--camera", "sim:back",
                                                   "--duration", "2", "--pace", "virtual", "--progress", "--preset", "ultrafast", path])
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(result.stdout)\(result.stderr)")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
        #expect(try TestSupport.probeStreams(path).first?["nb_read_frames"] as? String == "60")
    }

    /// A real hangup, not a `kill`: the tool runs on a pseudo-terminal (its controlling terminal,
    /// with the status line redrawn on it) and the terminal goes away. The kernel sends SIGHUP and
    /// every later write to the terminal fails (EIO); the movie is still finished and plays.
    @Test func recordFinishesThePlayableMovieWhenItsTerminalHangsUp() async throws {
        let dir = try TestSupport.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/hangup.mp4"
        // Python's pty.fork: the child leads a new session whose controlling terminal is the pty.
        // The parent reads the tool's output until a status line counts 10 frames (60 s deadline),
        // closes the terminal, and reports how the tool ended (within 120 s, else kills it).
        let script = #"""
            import os, pty, re, select, signal, sys, time
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            seen, deadline = b"", time.monotonic() + 60
            while not any(int(n) >= 10 for n in re.findall(rb"frame= *(\d+)", seen)):
                if time.monotonic() > deadline:
                    print("no status line within 60 s:", seen.decode(errors="replace")); os.kill(pid, signal.SIGKILL); sys.exit(2)
                ready, _, _ = select.select([fd], [], [], 1)
                if ready:
                    try: seen += os.read(fd, 4096)
                    except OSError: print("the tool ended first:", seen.decode(errors="replace")); sys.exit(2)
            os.close(fd)
            deadline = time.monotonic() + 120
            while True:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done: break
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGKILL); print("still running 120 s after the hangup"); sys.exit(2)
                select.select([], [], [], 0.05)
            print("exit" if os.WIFEXITED(status) else "signal", os.WEXITSTATUS(status) if os.WIFEXITED(status) else os.WTERMSIG(status))
            """#
        let result = try await offPool("python3", ["-c", script, CommandLineTests.binary, "record", "--camera", "sim:back",
                                                   "--microphone", "sim:mic", "--duration", "3600", "--size", "640x480",
                                                   "--pace", "virtual", "--fragment-interval", "0", "--preset", "ultrafast", path])
        #expect(result.status == 0, "\(result.stdout)\(result.stderr)")
        #expect(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "exit 0", "\(result.stdout)\(result.stderr)")
        let streams = try TestSupport.probeStreams(path)
        #expect(streams.compactMap { $0["codec_name"] as? String } == ["h264", "aac"], "\(streams)")
        let decode = try TestSupport.run("ffmpeg", ["-v", "error", "-i", path, "-f", "null", "-"])
        #expect(decode.status == 0 && decode.stderr.isEmpty, "\(decode.stderr)")
    }

    /// The media seconds in a status line's `time=HH:MM:SS.ss` (nil: not a status line).
    static func seconds(inStatus line: Substring) -> Double? {
        guard let range = line.range(of: "time=") else { return nil }
        let parts = line[range.upperBound...].prefix(while: { $0.isNumber || $0 == ":" || $0 == "." }).split(separator: ":")
        guard parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let s = Double(parts[2]) else { return nil }
        return h * 3600 + m * 60 + s
    }

    /// N in a status line's `frame=    N` (nil: not a status line).
    static func frames(inStatus line: Substring) -> Int? {
        guard let range = line.range(of: "frame=") else { return nil }
        return Int(line[range.upperBound...].drop(while: { $0 == " " }).prefix(while: \.isNumber))
    }
}
