import CaptureCore
import Foundation

/// The simulated microphone's signal. Sample `i` is a pure function of (spec, rate, i): a sine at
/// `toneFrequency`, replaced by a sine at `burstFrequency` of the same level for `burstDuration`
/// starting exactly at sample `t × rate` for every whole second t ≥ 1.
public struct ToneGenerator: Sendable {
    public let spec: SyncToneSpec
    public let sampleRate: Int
    private let amplitude: Double
    private let burstLength: Int64
    /// `sample`'s value for every phase step `(i × f) mod rate` either sine reaches (multiples of
    /// gcd(tone, burst, rate): 48 of 48 000 for 1 kHz and 3 kHz; the others stay 0 and are never
    /// read), so `fill` reads a table instead of calling `sin` per sample: the same expression, the same bits.
    private let wave: [Float]

    public init(spec: SyncToneSpec, sampleRate: Int) {
        self.spec = spec
        self.sampleRate = sampleRate
        amplitude = pow(10, spec.toneLevelDBFS / 20)
        burstLength = Int64((spec.burstDuration * Double(sampleRate)).rounded())
        let step = Self.gcd(Self.gcd(Int(spec.toneFrequency.rounded().magnitude), Int(spec.burstFrequency.rounded().magnitude)), sampleRate)
        wave = Self.wave(amplitude: amplitude, rate: sampleRate, step: step)
    }

    static func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

    /// One table per (amplitude, rate, step) in the process: a stream's generators and every session share it.
    private static let waves = Locked<[WaveKey: [Float]]>([:])
    private struct WaveKey: Hashable { let amplitudeBits: UInt64; let rate: Int; let step: Int }

    private static func wave(amplitude: Double, rate: Int, step: Int) -> [Float] {
        let key = WaveKey(amplitudeBits: amplitude.bitPattern, rate: rate, step: step)
        if let cached = waves.withLock({ $0[key] }) { return cached }
        var table = [Float](repeating: 0, count: max(rate, 1))
        for k in stride(from: 0, to: rate, by: max(step, 1)) {
            table[k] = Self.value(amplitude: amplitude, cycles: Int64(k), rate: Int64(rate))
        }
        waves.withLock { $0[key] = table }
        return table
    }

    /// The sine at `cycles / rate` of a turn, scaled: the one expression behind `sample` and `wave`.
    @inline(__always)
    private static func value(amplitude: Double, cycles: Int64, rate: Int64) -> Float {
        let phase = 2 * Double.pi * Double(cycles) / Double(rate)
        return Float(amplitude * sin(phase))
    }

    /// Whether sample `i` falls inside a sync burst.
    public func isBurst(sample i: Int64) -> Bool {
        let rate = Int64(sampleRate)
        return i >= rate && i % rate < burstLength
    }

    public func sample(_ i: Int64) -> Float {
        Self.value(amplitude: amplitude, cycles: cycles(i), rate: Int64(sampleRate))
    }

    /// Sample `i`'s phase step: `(i × f) mod rate`. Reduced in integers first so precision does not
    /// decay over long recordings.
    @inline(__always)
    private func cycles(_ i: Int64) -> Int64 {
        let frequency = isBurst(sample: i) ? spec.burstFrequency : spec.toneFrequency
        return (i * Int64(frequency.rounded())) % Int64(sampleRate)
    }

    /// Fills `count` interleaved frames starting at sample `first`, the same value on every channel
    /// (`sample`'s values, read from the table).
    public func fill(_ out: UnsafeMutablePointer<Float>, first: Int64, count: Int, channels: Int) {
        let rate = Int64(sampleRate)
        let tone = Int64(spec.toneFrequency.rounded()), burst = Int64(spec.burstFrequency.rounded())
        guard first >= 0, rate > 0, tone >= 0, burst >= 0 else {
            for n in 0..<count {
                let value = sample(first + Int64(n))
                for c in 0..<channels { out[n * channels + c] = value }
            }
            return
        }
        wave.withUnsafeBufferPointer { wave in
            // Runs of one sine (a burst, or the tone between bursts): the phase step advances by
            // f mod rate a sample, wrapping at rate, which is (i × f) mod rate without the two
            // divisions per sample `cycles` takes.
            var i = first, n = 0
            while n < count {
                let offset = i % rate, second = i - offset
                let inBurst = isBurst(sample: i)
                let end = inBurst ? second + burstLength : second + rate
                let run = Int(min(Int64(count - n), end - i))
                let advance = (inBurst ? burst : tone) % rate
                var step = cycles(i)
                // The steps repeat every rate / gcd(advance, rate) samples (48 for 1 kHz at 48 kHz).
                var a = advance, b = rate
                while b != 0 { (a, b) = (b, a % b) }
                let period = Int(rate / a)
                if channels == 1 && period * 4 <= run {
                    // Mono, a run of several periods: the first period from the table, then copies of
                    // what is written, doubling (whole periods, so the copies continue the phase).
                    for k in n..<(n + period) {
                        out[k] = wave[Int(step)]
                        step += advance
                        if step >= rate { step -= rate }
                    }
                    var filled = period
                    while filled < run {
                        let chunk = min(filled, run - filled)
                        (out + n + filled).update(from: out + n, count: chunk)
                        filled += chunk
                    }
                } else if channels == 1 {
                    // Mono (the simulated microphones' usual format): one store a sample, no channel loop.
                    for k in n..<(n + run) {
                        out[k] = wave[Int(step)]
                        step += advance
                        if step >= rate { step -= rate }
                    }
                } else {
                    for k in n..<(n + run) {
                        let value = wave[Int(step)]
                        for c in 0..<channels { out[k * channels + c] = value }
                        step += advance
                        if step >= rate { step -= rate }
                    }
                }
                n += run
                i += Int64(run)
            }
        }
    }
}
