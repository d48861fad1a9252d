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

    public init(spec: SyncToneSpec, sampleRate: Int) {
        self.spec = spec
        self.sampleRate = sampleRate
        amplitude = pow(10, spec.toneLevelDBFS / 20)
        burstLength = Int64((spec.burstDuration * Double(sampleRate)).rounded())
    }

    /// Whether sample `i` falls inside a sync burst.
    public func isBurst(sample i: Int64) -> Bool {
        let rate = Int64(sampleRate)
        return i >= rate && i % rate < burstLength
    }

    public func sample(_ i: Int64) -> Float {
        let rate = Int64(sampleRate)
        let frequency = isBurst(sample: i) ? spec.burstFrequency : spec.toneFrequency
        // Reduce the phase in integers first so precision does not decay over long recordings.
        let f = Int64(frequency.rounded())
        let cycles = (i * f) % rate
        let phase = 2 * Double.pi * Double(cycles) / Double(rate)
        return Float(amplitude * sin(phase))
    }

    /// Fills `count` interleaved frames starting at sample `first`, the same value on every channel.
    public func fill(_ out: UnsafeMutablePointer<Float>, first: Int64, count: Int, channels: Int) {
        for n in 0..<count {
            let value = sample(first + Int64(n))
            for c in 0..<channels { out[n * channels + c] = value }
        }
    }
}
