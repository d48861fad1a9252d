import CaptureCore
import Foundation

/// Average (RMS) and peak levels per channel in dBFS, as AVAudioRecorder/AVAudioPlayer meter:
/// `add` accumulates samples, `update` turns what arrived since the previous update into the
/// readings (a full-scale sine reads −3.01 dB average and 0 dB peak; silence −160 dB).
struct AudioLevelMeter: Sendable {
    static let floor: Float = -160
    private var sumSquares: [Double] = []
    private var peaks: [Float] = []
    private var counts: [Int] = []
    private(set) var average: [Float] = []
    private(set) var peak: [Float] = []

    /// Interleaved float samples with `channels` channels.
    mutating func add(_ samples: UnsafeBufferPointer<Float>, channels: Int) {
        guard channels > 0 else { return }
        if sumSquares.count != channels {
            sumSquares = Array(repeating: 0, count: channels)
            peaks = Array(repeating: 0, count: channels)
            counts = Array(repeating: 0, count: channels)
        }
        for (i, sample) in samples.enumerated() {
            let c = i % channels
            sumSquares[c] += Double(sample) * Double(sample)
            peaks[c] = max(peaks[c], abs(sample))
            counts[c] += 1
        }
    }

    mutating func add(_ buffer: AudioPCMBuffer) {
        let samples = buffer.floatSamples()
        samples.withUnsafeBufferPointer { add($0, channels: buffer.format.channelCount) }
    }

    /// Readings from the samples added since the last update (unchanged when none arrived).
    mutating func update() {
        guard counts.contains(where: { $0 > 0 }) else { return }
        average = zip(sumSquares, counts).map { sum, n in Self.dB(n > 0 ? (sum / Double(n)).squareRoot() : 0) }
        peak = peaks.map { Self.dB(Double($0)) }
        for c in counts.indices { (sumSquares[c], peaks[c], counts[c]) = (0, 0, 0) }
    }

    func averagePower(_ channel: Int) -> Float { average.indices.contains(channel) ? average[channel] : Self.floor }
    func peakPower(_ channel: Int) -> Float { peak.indices.contains(channel) ? peak[channel] : Self.floor }

    static func dB(_ amplitude: Double) -> Float {
        guard amplitude > 0 else { return floor }
        return Float(max(Double(floor), min(0, 20 * log10(amplitude))))
    }
}
