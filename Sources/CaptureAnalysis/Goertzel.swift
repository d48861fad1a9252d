#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A single-frequency DFT probe: the power of one frequency over a block of samples without
/// computing a whole spectrum — the cheap way to watch for a known tone.
struct Goertzel: Sendable {
    let frequency: Double
    let sampleRate: Int
    private let coefficient: Double

    init(frequency: Double, sampleRate: Int) {
        self.frequency = frequency
        self.sampleRate = sampleRate
        coefficient = 2 * cos(2 * Double.pi * frequency / Double(sampleRate))
    }

    /// `|Σ x[n]·e^(−iωn)|²` over `range`; valid for any frequency, not only bin centres.
    func power(_ samples: UnsafeBufferPointer<Float>, _ range: Range<Int>) -> Double {
        var s1 = 0.0
        var s2 = 0.0
        for i in range {
            let s0 = Double(samples[i]) + coefficient * s1 - s2
            s2 = s1
            s1 = s0
        }
        return max(0, s1 * s1 + s2 * s2 - coefficient * s1 * s2)
    }

    /// Amplitude of a sine at `frequency` that would produce this block's power: `2·|X| / N`.
    func amplitude(_ samples: UnsafeBufferPointer<Float>, _ range: Range<Int>) -> Double {
        guard !range.isEmpty else { return 0 }
        return 2 * power(samples, range).squareRoot() / Double(range.count)
    }
}
