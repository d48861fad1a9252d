import CaptureCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Mono audio per the sync-tone contract: a continuous sine, replaced by a burst of
/// `spec.burstFrequency` for `spec.burstDuration` starting at sample `t × rate` of every whole
/// second `t ≥ 1`, with the continuous tone's phase carried on as if uninterrupted.
enum SyntheticTone {
    static func samples(duration: Double, sampleRate: Int, startTime: Double = 0, spec: SyncToneSpec = SyncToneSpec(),
                        toneFrequency: Double? = nil, bursts: Bool = true, noise: Float = 0.001,
                        seed: UInt64 = 7) -> [Float] {
        let count = Int((duration * Double(sampleRate)).rounded())
        let firstSample = Int((startTime * Double(sampleRate)).rounded())
        let amplitude = pow(10, spec.toneLevelDBFS / 20)
        let tone = toneFrequency ?? spec.toneFrequency
        let burstLength = Int((spec.burstDuration * Double(sampleRate)).rounded())
        let rate = Double(sampleRate)
        var rng = SplitMix64(seed: seed)
        var out = [Float](repeating: 0, count: count)
        for i in 0 ..< count {
            let n = firstSample + i
            let second = n / sampleRate
            let intoSecond = n - second * sampleRate
            let value: Double
            if bursts && second >= 1 && intoSecond < burstLength {
                value = amplitude * sin(2 * Double.pi * spec.burstFrequency * Double(intoSecond) / rate)
            } else {
                value = amplitude * sin(2 * Double.pi * tone * Double(n) / rate)
            }
            let dither = noise * (Float(rng.next() % 20001) / 10000 - 1)
            out[i] = Float(value) + dither
        }
        return out
    }
}
