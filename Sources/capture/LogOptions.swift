import CaptureKit
import Foundation
import Logging

/// `--log-level LEVEL` and `--verbose` (= debug), accepted anywhere on the command line — before or
/// after the subcommand, up to a `--` — and taken out before ArgumentParser sees the arguments.
/// Without them the level is `CAPTUREKIT_LOG_LEVEL`'s, else `warning`. Log lines go to stderr
/// (swift-log's `StreamLogHandler`), labelled `capturekit.<module>`.
enum LogOptions {
    static let levels = Logger.Level.allCases.map(\.rawValue).joined(separator: "|")

    /// The arguments without the logging options, and the level they ask for (nil: none given).
    static func extract(_ arguments: [String]) throws(CommandFailure) -> (arguments: [String], level: Logger.Level?) {
        var rest: [String] = []
        var level: Logger.Level?
        var i = 0
        func parse(_ text: String) throws(CommandFailure) -> Logger.Level {
            guard let l = Logger.Level(rawValue: text.lowercased()) else {
                throw CommandFailure("--log-level takes one of \(levels), not '\(text)'")
            }
            return l
        }
        while i < arguments.count {
            let a = arguments[i]
            if a == "--" { rest += arguments[i...]; break }
            if a == "--verbose" {
                level = .debug
            } else if a == "--log-level" {
                guard i + 1 < arguments.count else { throw CommandFailure("--log-level needs a level: \(levels)") }
                level = try parse(arguments[i + 1])
                i += 1
            } else if a.hasPrefix("--log-level=") {
                level = try parse(String(a.dropFirst("--log-level=".count)))
            } else {
                rest.append(a)
            }
            i += 1
        }
        return (rest, level)
    }

    /// Sends swift-log to stderr and sets CaptureKit's level; returns the remaining arguments.
    static func apply(_ arguments: [String]) throws(CommandFailure) -> [String] {
        let (rest, level) = try extract(arguments)
        LoggingSystem.bootstrap { label in StreamLogHandler.standardError(label: label) }
        if let level { CaptureLogging.level = level }
        CaptureLogging.logger(.cli).debug("capture \(rest.joined(separator: " ")) (log level \(CaptureLogging.level))")
        return rest
    }
}
