import Foundation
import Logging

/// CaptureKit's logging, through swift-log: one `Logger` per module, labelled `capturekit.<module>`,
/// all at one process-wide level.
///
/// Messages go to whatever `LoggingSystem` the program bootstrapped (swift-log's default prints to
/// stderr). The level starts at `CAPTUREKIT_LOG_LEVEL` (`trace`, `debug`, `info`, `notice`,
/// `warning`, `error`, `critical`) when that is set, otherwise `warning`; the `capture` tool sets it
/// from `--log-level`/`--verbose`.
///
/// Levels: `error`/`critical` for failures CaptureKit could not report as a `CaptureError`
/// (a background write that failed after the caller returned), `warning` for things that degrade the
/// result (frames dropped, a fallback taken), `notice` for messages of the C libraries that the
/// returned error already carries, `info` for lifecycle (device opened, recording started/finished),
/// `debug` for decisions and the C libraries' informational output, `trace` for per-frame detail.
///
/// FFmpeg's `av_log` and ALSA's error handler are routed here (labels `capturekit.ffmpeg` and
/// `capturekit.alsa`) instead of printing to stderr themselves; their levels map one step down
/// (FFmpeg `error` → `notice`, `warning` → `info`, `info` → `debug`, verbose and below → `trace`)
/// because every failure they describe also reaches the caller as a typed `CaptureError`. At the
/// default level no FFmpeg or ALSA line is printed.
public enum CaptureLogging {
    /// The environment variable read once for the starting level.
    public static let environmentVariable = "CAPTUREKIT_LOG_LEVEL"

    /// The modules that log, each with its own label.
    public enum Module: String, Sendable, CaseIterable {
        case core, media, analysis, simulator, v4l2, alsa, ffmpeg, detection, kit, cli

        public var label: String { "capturekit.\(rawValue)" }
    }

    private struct State {
        var level: Logger.Level
        var observers: [@Sendable (Logger.Level) -> Void] = []
    }

    private static let state = Locked(State(level: startingLevel(ProcessInfo.processInfo.environment[environmentVariable])))

    /// The level `CAPTUREKIT_LOG_LEVEL`'s value stands for: `warning` when it is unset or not a level.
    public static func startingLevel(_ value: String?) -> Logger.Level {
        value.flatMap { Logger.Level(rawValue: $0.trimmingCharacters(in: .whitespaces).lowercased()) } ?? .warning
    }

    /// The process-wide level of every CaptureKit logger (and of the routed C libraries' messages).
    public static var level: Logger.Level {
        get { state.withLock { $0.level } }
        set {
            let observers = state.withLock { s in
                s.level = newValue
                return s.observers
            }
            for observer in observers { observer(newValue) }
        }
    }

    /// Runs `observer` now and whenever `level` changes (the FFmpeg routing keeps libavutil's own
    /// threshold in step, so messages below the level are never even formatted).
    public static func observeLevel(_ observer: @escaping @Sendable (Logger.Level) -> Void) {
        let current = state.withLock { s in
            s.observers.append(observer)
            return s.level
        }
        observer(current)
    }

    /// A logger for `module` at the current level. Cheap; call it where you log rather than keeping
    /// the value, so a later change of `level` applies.
    public static func logger(_ module: Module) -> Logger {
        var logger = Logger(label: module.label)
        logger.logLevel = level
        return logger
    }
}
