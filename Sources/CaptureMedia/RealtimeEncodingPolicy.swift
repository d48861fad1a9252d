import CaptureCore
import Foundation

/// Picks the x264 preset a real-time recording can sustain on this machine, now: it encodes a
/// short burst of frames at each candidate (slowest first) and takes the first that runs at
/// `headroom` × the frame rate. Quality degrades (a faster preset) before frames would drop.
/// Calibration content is seeded noise with moving bars, harder than most camera scenes: fine for
/// picking a preset, too pessimistic for dropping frames (at 1280x720 ultrafast it measures 110 fps
/// where the simulator's scene records 240 fps in full), so frames are shed only at run time, by
/// the movie output's bounded encoder queue (`MovieFileOutput.maximumEncoderQueueBytes`).
public enum RealtimeEncodingPolicy {
    public struct Decision: Sendable, Codable, Equatable {
        public var preset: String
        /// Frames per second the chosen preset reached in calibration.
        public var measuredFPS: Double
        public var requiredFPS: Double
        public var candidatesTried: [String: Double]
    }

    public static let candidates: [VideoEncoderSettings.Preset] = [.veryfast, .superfast, .ultrafast]

    public static func choose(dimensions: Dimensions, frameDuration: MediaTime, headroom: Double = 1.5,
                              calibrationFrames: Int = 12) throws(CaptureError) -> Decision {
        let required = 1 / frameDuration.seconds
        // Above 1280x720 the burst is encoded at 1280x720 and its rate scaled by the pixel count
        // (x264's time grows about linearly with it): calibrating veryfast at 3840x2160 took more
        // memory (≈ 400 MB at its peak) than the recording itself.
        let calibrationSize = dimensions.width * dimensions.height > 1280 * 720 ? Dimensions(width: 1280, height: 720) : dimensions
        let scale = Double(calibrationSize.width * calibrationSize.height) / Double(dimensions.width * dimensions.height)
        let frames = makeCalibrationFrames(calibrationSize, count: 4)
        var tried: [String: Double] = [:]
        for preset in candidates {
            let encoder = try VideoEncoder(settings: VideoEncoderSettings(
                dimensions: calibrationSize, inputPixelFormat: .yuv420, frameDuration: frameDuration, preset: preset))
            try encoder.open(globalHeader: true)
            let start = HostClock.now()
            for n in 0..<calibrationFrames {
                try encoder.encode(frames[n % frames.count], ticks: Int64(n)) { _ in }
            }
            try encoder.finish { _ in }
            let fps = Double(calibrationFrames) / max((HostClock.now() - start).seconds, 1e-6) * scale
            tried[preset.rawValue] = fps
            if fps >= required * headroom {
                return Decision(preset: preset.rawValue, measuredFPS: fps, requiredFPS: required, candidatesTried: tried)
            }
        }
        let fastest = candidates.last!.rawValue
        return Decision(preset: fastest, measuredFPS: tried[fastest] ?? 0, requiredFPS: required, candidatesTried: tried)
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
