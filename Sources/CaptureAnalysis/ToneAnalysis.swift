import CaptureCore
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Measurements on mono float audio (full scale ±1.0): sync-burst onsets, the tone's
/// frequency and its level.
public enum ToneAnalysis {
    /// Length of the sliding Goertzel window used to watch for bursts: short enough to place an
    /// edge sharply, long enough (several cycles at 3 kHz) to separate the burst from the tone.
    public static let burstWindowDuration = 0.002
    /// A window counts as "burst" when the amplitude it sees at the burst frequency reaches this
    /// fraction of the spec's tone amplitude (−10.5 dB). Well above the tone's leakage into the
    /// burst bin (< −20 dB) and far below a real burst, so moderate gain changes still detect.
    public static let burstDetectionRatio = 0.3
    /// Level reported for silence; also the floor of every dBFS value.
    public static let floorDBFS = -160.0

    /// Times where a burst at `spec.burstFrequency` begins, on the same timeline as `startTime`
    /// (the time of `samples[0]`), so a burst at sample `i` is reported as
    /// `startTime + i / sampleRate`.
    ///
    /// A 2 ms Goertzel window slides in 0.5 ms hops; a burst is a rising edge of its amplitude
    /// through `burstDetectionRatio` × the spec's tone amplitude. The edge is then refined sample
    /// by sample: while the window slides onto a burst, its amplitude ramps linearly from 0 to
    /// the burst's plateau, so the onset is where it crosses half the plateau (interpolated
    /// between samples) minus half a window — accurate to a fraction of a millisecond, and
    /// independent of the recording's gain. A burst already under way at the first sample has
    /// no rising edge and is not reported; after each onset the detector waits for the burst to
    /// end, so every burst yields exactly one onset.
    public static func burstOnsets(samples: [Float], sampleRate: Int, startTime: Double,
                                   spec: SyncToneSpec = SyncToneSpec()) -> [Double] {
        samples.withUnsafeBufferPointer {
            burstOnsets(samples: $0, sampleRate: sampleRate, startTime: startTime, spec: spec)
        }
    }

    /// `burstOnsets` over borrowed samples.
    public static func burstOnsets(samples: UnsafeBufferPointer<Float>, sampleRate: Int, startTime: Double,
                                   spec: SyncToneSpec = SyncToneSpec()) -> [Double] {
        guard sampleRate > 0 else { return [] }
        let window = max(8, Int((burstWindowDuration * Double(sampleRate)).rounded()))
        let count = samples.count
        guard count >= window else { return [] }
        let hop = max(1, window / 4)
        let goertzel = Goertzel(frequency: spec.burstFrequency, sampleRate: sampleRate)
        let threshold = burstDetectionRatio * pow(10, spec.toneLevelDBFS / 20)
        let burstLength = max(0, Int((spec.burstDuration * Double(sampleRate)).rounded()))
        // Amplitude of the window that ends (exclusively) at sample `end`.
        func amplitude(endingAt end: Int) -> Double {
            goertzel.amplitude(samples, (end - window) ..< end)
        }

        var onsets: [Double] = []
        var armed = false
        var end = window
        while end <= count {
            let level = amplitude(endingAt: end)
            if !armed {
                // Re-arm only once clearly below the threshold (hysteresis against flicker).
                if level < threshold * 0.7 { armed = true }
                end += hop
                continue
            }
            guard level >= threshold else {
                end += hop
                continue
            }
            // The plateau the ramp climbs to: the strongest window within one window length.
            var plateau = level
            var probe = end + hop
            while probe <= min(count, end + window + hop) {
                plateau = max(plateau, amplitude(endingAt: probe))
                probe += hop
            }
            let half = plateau / 2
            // The ramp starts at most one window plus one hop before this end; find where it
            // first crosses half the plateau.
            var previousEnd = max(window, end - window - hop)
            var previous = amplitude(endingAt: previousEnd)
            var crossing = Double(previousEnd)
            if previous < half {
                var candidate = previousEnd + 1
                while candidate <= min(count, end + window) {
                    let current = amplitude(endingAt: candidate)
                    if current >= half {
                        crossing = Double(previousEnd) + (half - previous) / (current - previous)
                        break
                    }
                    previous = current
                    previousEnd = candidate
                    candidate += 1
                }
            }
            let onsetSample = crossing - Double(window) / 2
            onsets.append(startTime + onsetSample / Double(sampleRate))
            armed = false
            // Skip past the rest of this burst before looking for the next rising edge.
            end = max(end + hop, Int(onsetSample.rounded(.up)) + burstLength)
        }
        return onsets
    }

    /// Dominant frequency in Hz of `samples`, or nil when there are fewer than 64 samples or
    /// they are silent.
    ///
    /// Analyses the largest power-of-two block (at most `maxLength`) centred in the slice: Hann
    /// window, radix-2 FFT, then Gaussian interpolation (a parabola through the log magnitudes
    /// of the peak bin and its neighbours), which for a Hann window places a sine's peak to a
    /// few hundredths of a bin — well under 0.1 Hz for 32768 samples at 48 kHz. Bins 0 and 1 are
    /// skipped so a DC offset cannot win. Choose a burst-free stretch: a burst adds a second peak.
    public static func dominantFrequency(samples: ArraySlice<Float>, sampleRate: Int,
                                         maxLength: Int = 65536) -> Double? {
        guard sampleRate > 0 else { return nil }
        let available = min(samples.count, max(0, maxLength))
        guard available >= 64 else { return nil }
        var n = 1
        while n * 2 <= available { n *= 2 }
        let first = samples.startIndex + (samples.count - n) / 2

        var real = [Double](repeating: 0, count: n)
        var imag = [Double](repeating: 0, count: n)
        let scale = 2 * Double.pi / Double(n)
        for i in 0 ..< n {
            let hann = 0.5 - 0.5 * cos(scale * Double(i))
            real[i] = Double(samples[first + i]) * hann
        }
        FFT.transform(real: &real, imag: &imag)

        var peak = 2
        var peakPower = -1.0
        for k in 2 ..< (n / 2 - 1) {
            let power = real[k] * real[k] + imag[k] * imag[k]
            if power > peakPower {
                peakPower = power
                peak = k
            }
        }
        guard peakPower > 0 else { return nil }
        // ln|X| = ½·ln(power); the common ½ cancels in the ratio below.
        func logPower(_ k: Int) -> Double {
            log(max(real[k] * real[k] + imag[k] * imag[k], Double.leastNormalMagnitude))
        }
        let a = logPower(peak - 1), b = logPower(peak), c = logPower(peak + 1)
        let denominator = a - 2 * b + c
        let delta = denominator < 0 ? min(0.5, max(-0.5, 0.5 * (a - c) / denominator)) : 0
        return (Double(peak) + delta) * Double(sampleRate) / Double(n)
    }

    /// Dominant frequency of `samples[range]` (all of them when `range` is nil).
    public static func dominantFrequency(samples: [Float], sampleRate: Int, range: Range<Int>? = nil,
                                         maxLength: Int = 65536) -> Double? {
        let bounds = (range ?? samples.indices).clamped(to: samples.indices)
        return dominantFrequency(samples: samples[bounds], sampleRate: sampleRate, maxLength: maxLength)
    }

    /// RMS level in dBFS (a full-scale sine is −3.01 dBFS); `floorDBFS` for silence or no samples.
    public static func rmsDBFS(_ samples: ArraySlice<Float>) -> Double {
        guard !samples.isEmpty else { return floorDBFS }
        var sum = 0.0
        for sample in samples {
            let value = Double(sample)
            sum += value * value
        }
        return dBFS(amplitude: (sum / Double(samples.count)).squareRoot())
    }

    /// RMS level in dBFS of a whole buffer.
    public static func rmsDBFS(_ samples: [Float]) -> Double {
        rmsDBFS(samples[...])
    }

    /// Peak level in dBFS (largest absolute sample); `floorDBFS` for silence or no samples.
    public static func peakDBFS(_ samples: ArraySlice<Float>) -> Double {
        var peak: Float = 0
        for sample in samples {
            peak = max(peak, abs(sample))
        }
        return dBFS(amplitude: Double(peak))
    }

    /// Peak level in dBFS of a whole buffer.
    public static func peakDBFS(_ samples: [Float]) -> Double {
        peakDBFS(samples[...])
    }

    /// `20·log10(amplitude)`, never below `floorDBFS`.
    static func dBFS(amplitude: Double) -> Double {
        guard amplitude > 0, amplitude.isFinite else { return floorDBFS }
        return max(floorDBFS, 20 * log10(amplitude))
    }
}
