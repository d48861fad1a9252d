import CaptureCore
import Foundation

/// Picks the x264 preset a real-time recording can sustain on this machine, now: it encodes a
/// short burst of frames at each candidate (slowest first) and takes the first that runs at
/// `headroom` × the frame rate. Quality degrades (a faster preset) before frames would drop; when
/// even the fastest preset cannot keep the rate, the recording keeps one frame in every
/// `videoFrameInterval` (the lowest that fits; the skipped frames are reported). Calibration content
/// is seeded noise with moving bars, harder than most camera scenes.
public enum RealtimeEncodingPolicy {
    public struct Decision: Sendable, Codable, Equatable {
        public var preset: String
        /// Frames per second the chosen preset reached in calibration.
        public var measuredFPS: Double
        public var requiredFPS: Double
        public var candidatesTried: [String: Double]
        /// Record one frame in every this many (1: every frame); set when no preset keeps the rate.
        public var videoFrameInterval: Int = 1
    }

    public static let candidates: [VideoEncoderSettings.Preset] = [.veryfast, .superfast, .ultrafast]

    public static func choose(dimensions: Dimensions, frameDuration: MediaTime, headroom: Double = 1.5,
                              calibrationFrames: Int = 12) throws(CaptureError) -> Decision {
        let required = 1 / frameDuration.seconds
        let frames = makeCalibrationFrames(dimensions, count: 4)
        var tried: [String: Double] = [:]
        for preset in candidates {
            let encoder = try VideoEncoder(settings: VideoEncoderSettings(
                dimensions: dimensions, inputPixelFormat: .yuv420, frameDuration: frameDuration, preset: preset))
            try encoder.open(globalHeader: true)
            let start = HostClock.now()
            for n in 0..<calibrationFrames {
                try encoder.encode(frames[n % frames.count], ticks: Int64(n)) { _ in }
            }
            try encoder.finish { _ in }
            let fps = Double(calibrationFrames) / max((HostClock.now() - start).seconds, 1e-6)
            tried[preset.rawValue] = fps
            if fps >= required * headroom {
                return Decision(preset: preset.rawValue, measuredFPS: fps, requiredFPS: required, candidatesTried: tried)
            }
        }
        let fastest = candidates.last!.rawValue
        let measured = tried[fastest] ?? 0
        // Frame skipping, documented and reported: the smallest interval whose rate the fastest preset keeps.
        let interval = measured > 0 ? max(1, Int((required * headroom / measured).rounded(.up))) : 1
        return Decision(preset: fastest, measuredFPS: measured, requiredFPS: required, candidatesTried: tried,
                        videoFrameInterval: interval)
    }

    /// Seeded noise under moving bars: every frame differs, so the encoder does real work.
    static func makeCalibrationFrames(_ d: Dimensions, count: Int) -> [PixelBuffer] {
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        return (0..<count).map { n in
            let buffer = PixelBuffer(format: .yuv420, width: d.width, height: d.height)
            for plane in 0..<buffer.planeCount {
                let base = buffer.producerBaseAddress(ofPlane: plane).assumingMemoryBound(to: UInt8.self)
                let rows = buffer.planeRows[plane], stride = buffer.bytesPerRow[plane]
                for row in 0..<rows {
                    let line = base + row * stride
                    // 8 bytes of noise at a time, with a bar pattern that moves per frame.
                    var x = 0
                    while x + 8 <= stride {
                        state ^= state << 13; state ^= state >> 7; state ^= state << 17
                        var word = state & 0x1F1F_1F1F_1F1F_1F1F
                        if ((x / 64) + n) % 3 == 0 { word |= 0x8080_8080_8080_8080 }
                        UnsafeMutableRawPointer(line + x).storeBytes(of: word, as: UInt64.self)
                        x += 8
                    }
                }
            }
            return buffer
        }
    }
}
