import ArgumentParser
import CCaptureShims
import CaptureKit
import Foundation

@main
struct CaptureCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "capture",
        abstract: "Record from cameras and microphones — simulated or real — with CaptureKit.",
        discussion: """
            Devices are named by unique ID: sim:back, sim:front, sim:webcam (simulated cameras), sim:mic (simulated microphone).
            Simulated frames carry a frame-index stamp and A/V sync markers (see README).

            Logging (any command, anywhere on the line): --log-level trace|debug|info|notice|warning|error|critical, \
            --verbose (= debug). Default: $CAPTUREKIT_LOG_LEVEL, else warning. Log lines go to stderr, labelled \
            capturekit.<module> (FFmpeg's and ALSA's own messages as capturekit.ffmpeg and capturekit.alsa).
            """,
        version: CaptureKit.version,
        subcommands: [RecordCommand.self, PhotoCommand.self, DevicesCommand.self, ControlsCommand.self, FormatsCommand.self,
                      InspectCommand.self, AudioCommand.self, FixtureCommand.self, SimulateCommand.self, ScanCommand.self,
                      TestCommand.self])

    static func main() async {
        // A file-size limit (ulimit -f) must end a recording with a typed error (writeFailed,
        // EFBIG: "File too large") and a file cut back to its complete fragments, not kill the
        // process with SIGXFSZ halfway through a write.
        signal(SIGXFSZ, SIG_IGN)
        // A reader that went away (`capture record … | head`, a closed terminal's pipe) makes writes
        // fail with EPIPE instead of killing the process before its recording is finished.
        signal(SIGPIPE, SIG_IGN)
        // Frames are large (12 MB at 3840x2160) and come and go in pools. glibc's default raises
        // its mmap threshold to the largest block freed, after which frame-sized blocks come from
        // arenas that never shrink: a fixed threshold keeps them mapped and unmapped whole (a 4K
        // real-time recording peaked about 50 MB lower, measured with `capture record --json`).
        // 4 MiB: 4K frames and x264's 4K planes are mapped; 1080p frames (3.1 MB) and smaller stay
        // in the arenas, as they did before (no page faults for blocks reused every frame).
        _ = ck_fix_mmap_threshold(4 << 20)
        let arguments: [String]
        do { arguments = try LogOptions.apply(Array(CommandLine.arguments.dropFirst())) } catch {
            printError("Error: \(error)")
            Foundation.exit(ExitCode.validationFailure.rawValue)
        }
        await main(arguments)
    }
}

/// Writes to standard error (the CLI's messages; results go to standard output).
func printError(_ message: String) {
    writeStandardError(message + "\n")
}

/// Writes `text` to standard error with write(2), ignoring failure: after a hangup (SIGHUP: the
/// terminal is gone, writes fail with EIO) or with a closed pipe (EPIPE; SIGPIPE is ignored) a
/// status line that cannot be shown must not stop a recording from being finished, as
/// `FileHandle.write`, which traps on an error, would.
func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        if written < 0 && errno == EINTR { continue }
        guard written > 0 else { return }
        bytes = bytes.dropFirst(written)
    }
}

extension CapturePace: ExpressibleByArgument {}
extension VideoEncoderSettings.Preset: ExpressibleByArgument {}
extension VideoStabilizationMode: ExpressibleByArgument {}
extension MovieContainer: ExpressibleByArgument {}
extension VideoCodec: ExpressibleByArgument {}

/// True when two output options name one path (`a.xml`, `./a.xml`, `/cwd/a.xml`), before either exists.
func samePath(_ a: String, _ b: String) -> Bool {
    func absolute(_ p: String) -> String {
        ((p.hasPrefix("/") ? p : FileManager.default.currentDirectoryPath + "/" + p) as NSString).standardizingPath
    }
    return absolute(a) == absolute(b)
}

/// Turns a library error into a clean non-zero exit with its message.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ error: CaptureError) { description = "\(error)" }
    /// For a command with `--overwrite`: an existing path's message says so.
    init(_ error: CaptureError, overwritable: Bool) {
        if overwritable, case .outputFileExists(let path) = error {
            description = "cannot write \(path): \(OutputPath.kind(at: path) ?? "something") exists there; "
                + (OutputPath.isRegularFile(path) ? "pass --overwrite to replace it, or choose another name"
                   : "it is never replaced, even with --overwrite; choose another name")
        } else {
            description = "\(error)"
        }
    }
    init(_ message: String) { description = message }
}

func encodeJSON<T: Encodable>(_ value: T) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return String(decoding: (try? encoder.encode(value)) ?? Data(), as: UTF8.self)
}

/// The envelope every `--json` output shares: the body's own keys (or, for a list, the list under
/// `listKey`) plus `schemaVersion` (bumped when a key changes meaning or goes away; new keys do not
/// bump it), `command` (the subcommand path, e.g. "fixture info") and `captureKitVersion`.
struct JSONEnvelope<Body: Encodable>: Encodable {
    static var schemaVersion: Int { jsonSchemaVersion }
    let command: String
    let body: Body
    let listKey: String?

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        if listKey == nil { try body.encode(to: encoder) }
        var container = encoder.container(keyedBy: Key.self)
        if let listKey { try container.encode(body, forKey: Key(listKey)) }
        try container.encode(jsonSchemaVersion, forKey: Key("schemaVersion"))
        try container.encode(command, forKey: Key("command"))
        try container.encode(CaptureKit.version, forKey: Key("captureKitVersion"))
    }
}

/// The schema version of the `--json` outputs (README: "Machine-readable output").
let jsonSchemaVersion = 1

/// `value` in the shared envelope, pretty-printed with sorted keys.
func encodeJSON<T: Encodable>(_ value: T, command: String, listKey: String? = nil) -> String {
    encodeJSON(JSONEnvelope(command: command, body: value, listKey: listKey))
}
