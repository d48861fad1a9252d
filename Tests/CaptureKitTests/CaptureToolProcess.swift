import CaptureKit
import Foundation

/// The `capture` binary running in the background, its output collected as it comes, so a test
/// acts on what the tool says (a "recording to" line, a status line) instead of after a fixed
/// sleep: each wait has a deadline (`waitFor`) and fails naming what it waited for.
final class CaptureToolProcess {
    struct Exit {
        var status: Int32
        /// `.exit` for an ordinary exit, `.uncaughtSignal` when a signal ended the process.
        var reason: Process.TerminationReason
        var stdout: String
        var stderr: String
    }

    struct Timeout: Error, CustomStringConvertible {
        let description: String
    }

    private struct Output {
        var stdout = Data(), stderr = Data()
        var stdoutClosed = false, stderrClosed = false
    }

    private let process: Process
    private let output = Locked(Output())

    init(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLineTests.binary)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // One reading thread per pipe (blocking reads until end of file): Foundation's
        // readabilityHandler sometimes never reports the end of a pipe the tool closed.
        let output = output
        for (handle, isStdout) in [(out.fileHandleForReading, true), (err.fileHandleForReading, false)] {
            Thread {
                while case let data = handle.availableData, !data.isEmpty {
                    output.withLock { isStdout ? $0.stdout.append(data) : $0.stderr.append(data) }
                }
                output.withLock { isStdout ? ($0.stdoutClosed = true) : ($0.stderrClosed = true) }
            }.start()
        }
        self.process = process
    }

    var pid: Int32 { process.processIdentifier }
    var stderr: String { output.withLock { String(decoding: $0.stderr, as: UTF8.self) } }

    /// The first stderr line that `matches`, once the tool has printed it; throws after `timeout`
    /// or when the tool ends first.
    @discardableResult
    func waitForStderrLine(_ what: String, timeout: Duration = .seconds(120), _ matches: (Substring) -> Bool) async throws -> String {
        var found: Substring?
        await waitFor(timeout: timeout) {
            found = stderr.split(whereSeparator: { $0 == "\n" || $0 == "\r" }).first(where: matches)
            return found != nil || !process.isRunning
        }
        guard let found else {
            throw Timeout(description: "no stderr line \(what) within \(timeout) (running: \(process.isRunning)); stderr so far:\n\(stderr)")
        }
        return String(found)
    }

    /// Sends `signal` to the tool.
    func send(_ signal: Int32) {
        if process.isRunning { kill(process.processIdentifier, signal) }
    }

    /// Waits for the tool to end and its output to close; after `timeout` it is killed and this throws.
    func exit(timeout: Duration = .seconds(120)) async throws -> Exit {
        let ended = await waitFor(timeout: timeout) {
            !process.isRunning && output.withLock { $0.stdoutClosed && $0.stderrClosed }
        }
        guard ended else {
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
            // Still running: where its threads are (gdb, when installed), so a hang names its place.
            let stacks = process.isRunning ? (try? TestSupport.run("gdb", ["-p", "\(pid)", "-batch", "-ex", "thread apply all bt 12"]))?.stdout ?? "" : ""
            let state = output.withLock { "stdout closed: \($0.stdoutClosed), stderr closed: \($0.stderrClosed), stdout: \(String(decoding: $0.stdout, as: UTF8.self))" }
            throw Timeout(description: "the tool did not end within \(timeout) (running: \(process.isRunning); \(state)); stderr:\n\(stderr)\n\(stacks)")
        }
        return output.withLock {
            Exit(status: process.terminationStatus, reason: process.terminationReason,
                 stdout: String(decoding: $0.stdout, as: UTF8.self), stderr: String(decoding: $0.stderr, as: UTF8.self))
        }
    }
}
