import CaptureKit
import Foundation

// Range checks of a scenario's values against its own duration, made when the file is read, so a
// value that would make a run last for ever (a 10⁶ ms slow disk stalls every write ~17 minutes) is
// an `invalidScenario` naming the field, not a hang.
extension Scenario {
    /// A scenario is read only from a regular file: a FIFO or a device could make the read wait for ever.
    static func requireRegularFile(_ path: String) throws(CaptureError) {
        guard let kind = InputFile.nonRegularKind(path) else { return }
        throw .invalidScenario(file: path, field: "(file)", problem: "it is \(kind), not a regular file (reading it could wait for ever); give a scenario file (.json)")
    }
}

extension ScenarioParser {
    /// A number as the file wrote it (the shortest text that reads back the same).
    static func text(_ value: Any?) -> String {
        (value as? NSNumber).map { $0 is NSDecimalNumber ? $0.description : "\(JSONNumber.double($0) ?? $0.doubleValue)" } ?? kind(value)
    }

    /// A scenario's fixture must be a regular file (replaying a FIFO would wait for ever).
    func requireRegularFixture(_ resolved: String, field: String) throws(CaptureError) {
        guard let kind = InputFile.nonRegularKind(resolved) else { return }
        throw fail(field, "\(resolved) is \(kind), not a fixture file (reading it could wait for ever)")
    }

    /// The most wall time a scenario's `slowDisk` and `slowEncoder` faults may add in all: they
    /// stall real time on every write or frame, whatever the pace.
    static let wallTimeBudget = 60.0

    /// `seed`: a whole number from 0 to 2⁶⁴−1.
    func seed(_ value: Any) throws(CaptureError) -> UInt64 {
        guard let seed = JSONNumber.unsigned(value) else {
            let what = JSONNumber.double(value) == nil ? Self.kind(value) : Self.text(value)
            throw fail("seed", "must be a whole number from 0 to \(UInt64.max), not \(what)")
        }
        return seed
    }

    /// Each fault's own amount must fit in what is left of the scenario after it; the wall-time
    /// faults together must stay within `wallTimeBudget`.
    func checkWallTime(_ s: Scenario) throws(CaptureError) {
        let fps = s.camera == nil ? 0 : s.frameRate
        // AAC: one packet per 1024 samples at 48 kHz.
        let audioPackets = s.microphone == nil ? 0 : 48_000.0 / 1024
        var wall = 0.0
        for (i, event) in s.faults.events.enumerated() {
            let start: Double
            switch event.at {
            case .time(let t): start = t.seconds
            case .frame(let n): start = fps > 0 ? Double(n) / fps : 0
            }
            let left = max(0, s.duration - start)
            let leftText = String(format: "%g", left)
            func field(_ key: String) -> String { "faults[\(i)].\(key)" }
            switch event.fault {
            case .stall(let ms), .audioGap(let ms):
                guard Double(ms) / 1000 <= left + 1e-9 else {
                    throw fail(field("milliseconds"), "\(ms) ms is longer than the \(leftText) s left of the scenario after it (duration \(String(format: "%g", s.duration)) s; allowed: 1…\(Int((left * 1000).rounded(.down))))")
                }
            case .jitter(let us, _):
                let period = fps > 0 ? 1 / fps : s.duration
                guard Double(us) / 1_000_000 <= period else {
                    throw fail(field("microseconds"), "\(us) µs is more than a frame period (\(Int(period * 1_000_000)) µs at \(String(format: "%g", fps)) fps); allowed: 1…\(Int(period * 1_000_000))")
                }
            case .slowDisk(let ms), .slowEncoder(let ms):
                let isDisk: Bool
                if case .slowDisk = event.fault { isDisk = true } else { isDisk = false }
                // The writes (packets) or frames that come after it, each stalled `ms` of wall time.
                let count = max(1, left * (isDisk ? fps + audioPackets : max(fps, 1)))
                let seconds = Double(ms) / 1000 * count
                wall += seconds
                guard wall <= Self.wallTimeBudget else {
                    let most = max(1, Int((Self.wallTimeBudget * 1000 / count).rounded(.down)))
                    throw fail(field("milliseconds"), "\(ms) ms on each of the about \(Int(count.rounded())) \(isDisk ? "writes" : "frames") left after it adds \(String(format: "%.0f", seconds)) s of wall time, more than the \(Int(Self.wallTimeBudget)) s a scenario may add; allowed here: 1…\(most)")
                }
            default:
                break
            }
        }
    }
}
