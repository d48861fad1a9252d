import ArgumentParser
import CaptureKit
import Foundation

/// `--progress` / `--quiet` of the long-running commands.
struct StatusOptions: ParsableArguments {
    @Flag(help: "Print a plain status line every second even when stderr is not a terminal.")
    var progress = false

    @Flag(help: "No live status line (the start line and the final summary still print).")
    var quiet = false

    enum Mode: Equatable { case none, inPlace, lines }

    /// On a terminal (stderr): one line redrawn in place; otherwise nothing unless --progress.
    var mode: Mode {
        if quiet { return .none }
        if isatty(STDERR_FILENO) == 1 { return .inPlace }
        return progress ? .lines : .none
    }
}

/// Redraws a status line on stderr twice a second (in place: `\r` and erase-to-end-of-line, as
/// ffmpeg does) or prints one plain line a second, from `sample`, until stopped.
final class StatusReporter: Sendable {
    /// Behind a lock because Dispatch's source protocols are not `Sendable`.
    private let timer: Locked<any DispatchSourceTimer>
    private let mode: StatusOptions.Mode
    private let drew = Locked(false)

    init?(mode: StatusOptions.Mode, sample: @escaping @Sendable () -> CaptureStatus?) {
        guard mode != .none else { return nil }
        self.mode = mode
        // Its own user-interactive queue and a 10 ms leeway, not the default global pool: on a loaded
        // two-core machine a tick once ran 1.1 s after the one before, breaking "at least once a second".
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "capture.status-line", qos: .userInteractive))
        let interval: DispatchTimeInterval = mode == .inPlace ? .milliseconds(500) : .seconds(1)
        timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
        timer.setEventHandler { [mode, drew] in
            guard let status = sample() else { return }
            let line = StatusLine.render(status)
            writeStandardError(mode == .inPlace ? "\r" + line + "\u{1B}[K" : line + "\n")
            drew.withLock { $0 = true }
        }
        timer.resume()
        self.timer = Locked(timer)
    }

    /// Stops the updates and ends an in-place line, so what follows starts on a fresh line. Idempotent.
    func stop() {
        timer.withLock { $0.cancel() }
        let ended = drew.withLock { d -> Bool in
            defer { d = false }
            return d
        }
        if mode == .inPlace, ended { writeStandardError("\n") }
    }

    /// The size of the file at `path` now (nil when there is none yet).
    static func fileSize(_ path: String) -> Int64? {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.int64Value
    }
}
