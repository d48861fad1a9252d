import ArgumentParser
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
            """,
        subcommands: [RecordCommand.self, DevicesCommand.self, ControlsCommand.self, FormatsCommand.self])
}

/// Writes to standard error (the CLI's messages; results go to standard output).
func printError(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

extension CapturePace: ExpressibleByArgument {}
extension VideoEncoderSettings.Preset: ExpressibleByArgument {}

/// Turns a library error into a clean non-zero exit with its message.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String
    init(_ error: CaptureError) { description = "error: \(error)" }
    init(_ message: String) { description = "error: \(message)" }
}

func encodeJSON<T: Encodable>(_ value: T) -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    return String(decoding: (try? encoder.encode(value)) ?? Data(), as: UTF8.self)
}
