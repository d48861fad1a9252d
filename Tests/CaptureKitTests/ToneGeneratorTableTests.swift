import CaptureKit
import Foundation
import Testing

/// `ToneGenerator.fill` reads a table that holds only the phase steps its two sines reach
/// (multiples of gcd(tone, burst, rate)); every sample it writes must be `sample(i)`'s bits, on
/// every channel, across bursts and second boundaries, whatever the frequencies and the rate.
struct ToneGeneratorTableTests {
    static let specs: [(tone: Double, burst: Double, rate: Int, channels: Int)] = [
        (1000, 3000, 48_000, 1),     // the default: 48 steps
        (441, 997, 44_100, 2),       // coprime burst: every step
        (1000.4, 2999.6, 48_000, 1), // frequencies are rounded first
        (440, 880, 16_000, 3),
        (0, 1500, 8_000, 1),         // silence between bursts
    ]

    @Test(arguments: 0..<specs.count)
    func fillWritesSampleBitsEverywhere(_ index: Int) {
        let (tone, burst, rate, channels) = Self.specs[index]
        var spec = SyncToneSpec()
        spec.toneFrequency = tone
        spec.burstFrequency = burst
        let generator = ToneGenerator(spec: spec, sampleRate: rate)
        // Across the first burst (at 1 s) and the second, in odd-sized pieces starting mid-second.
        let first = Int64(rate) - 777, total = 2 * rate + 1500
        let out = UnsafeMutablePointer<Float>.allocate(capacity: total * channels)
        defer { out.deallocate() }
        var written = 0
        while written < total {
            let count = min(1021, total - written)
            generator.fill(out + written * channels, first: first + Int64(written), count: count, channels: channels)
            written += count
        }
        var mismatches = 0, bursts = 0
        for n in 0..<total {
            let i = first + Int64(n)
            if generator.isBurst(sample: i) { bursts += 1 }
            for c in 0..<channels where out[n * channels + c].bitPattern != generator.sample(i).bitPattern { mismatches += 1 }
        }
        #expect(mismatches == 0, "spec \(index): \(mismatches) samples differ from sample(i)")
        #expect(bursts > 0, "spec \(index): the range must cross a burst")
    }
}
