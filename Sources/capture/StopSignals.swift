import CaptureKit
import Dispatch
import Foundation
import Glibc

/// How the long-running commands (`record`, `fixture record`, `simulate`, `audio record`,
/// `audio play`) end on a signal — the one mechanism they all share.
///
/// SIGINT (Ctrl-C), SIGTERM (`kill`, systemd, CI runners), SIGHUP (the terminal or SSH session went
/// away) and SIGQUIT (Ctrl-\) all mean "stop now and keep what was made": the first of them runs
/// the command's `stop` action once — a recording is finished exactly as at the end of
/// `--duration` (stop reason `requested`) — and the command then exits as it would have anyway:
/// 0 with its summary when the file was finished, the usual failure exit otherwise. (The tool's own
/// code, not the shell's 128 + signal: the signal asked for the end, it did not cut it short.)
/// Further signals while it finishes are ignored; SIGKILL still ends the process at once (a
/// fragmented movie keeps its complete fragments).
///
/// From `init` on, the signals' default actions (termination; for SIGQUIT, the Swift runtime's
/// crash backtrace) are gone for the rest of the process: after `cancel()` (the recording is
/// finished) they are ignored, so a late signal cannot cut the summary short.
final class StopSignals: Sendable {
    /// The signals that stop a command cleanly.
    static let handled: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    private let sources: Locked<[any DispatchSourceSignal]>
    private let first = Locked<Int32?>(nil)

    /// Starts listening; `stop` runs once, on a Dispatch queue, at the first signal.
    init(stop: @escaping @Sendable () -> Void) {
        let first = self.first
        sources = Locked(Self.handled.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global(qos: .userInitiated))
            source.setEventHandler {
                let isFirst = first.withLock { received in
                    defer { received = received ?? number }
                    return received == nil
                }
                guard isFirst else { return }
                printError("capture: \(Self.name(number)) received: finishing")
                stop()
            }
            source.resume()
            return source
        })
    }

    /// The first signal that arrived (nil: none yet). A command checks it once its recording has
    /// started, so that a signal that came before there was anything to stop still stops it.
    var received: Int32? { first.withLock { $0 } }

    /// Stops listening: the stop action runs no more (the signals stay ignored).
    func cancel() {
        sources.withLock { for source in $0 { source.cancel() } }
    }

    static func name(_ number: Int32) -> String {
        switch number {
        case SIGINT: "SIGINT"
        case SIGTERM: "SIGTERM"
        case SIGHUP: "SIGHUP"
        case SIGQUIT: "SIGQUIT"
        default: "signal \(number)"
        }
    }
}
