import CaptureCore
import Foundation

/// Where the image lands on the sensor in one frame, relative to a steady camera: a translation
/// and a small rotation about the centre, then a crop (a zoom about the centre, `scale` ≥ 1) when
/// a stabilizer keeps a margin. Applied to the rendered scene before the markers are drawn.
public struct FrameMotion: Sendable, Hashable {
    /// Pixels (luma) the image moves right and down.
    public var dx = 0.0, dy = 0.0
    /// Radians, clockwise.
    public var angle = 0.0
    /// Crop factor: 1 shows the whole sensor; 1.1 shows the middle 1/1.1 of it, enlarged.
    public var scale = 1.0
    /// The scene frame shown (the box's position): earlier than the frame index when a stabilizer
    /// that looks ahead delays the picture (cinematic).
    public var sceneFrame: Int64

    public init(dx: Double = 0, dy: Double = 0, angle: Double = 0, scale: Double = 1, sceneFrame: Int64) {
        self.dx = dx
        self.dy = dy
        self.angle = angle
        self.scale = scale
        self.sceneFrame = sceneFrame
    }

    /// True when the picture is the scene as a steady camera sees it.
    public var isIdentity: Bool { dx == 0 && dy == 0 && angle == 0 && scale == 1 }
}

/// The simulated hand shake and the video stabilizer that acts on it (AVCaptureVideoStabilizationMode).
///
/// Shake: frame n moves by a seeded, deterministic jitter — a translation uniform in ±A pixels on
/// each axis and a rotation uniform in ±A·0.0015 rad (A = `scene.shakeAmplitude`, 0 by default, so
/// nothing moves unless a test or scenario asks). The stabilizer knows the motion as a phone's does
/// from its gyroscope:
/// - `standard`: crops 10 % (scale 1.1: a narrower field of view), counter-rotates each frame and
///   counter-shifts it by its own translation in whole pixels (what is left: the sub-pixel part). No
///   latency, no smoothing.
/// - `cinematic` (and `cinematicExtended`): crops 20 % (scale 1.2) and follows a smoothed camera
///   path, the mean of the motion over a window of ±`cinematicLatency` frames centred on the frame
///   shown, so it needs frames from the future: the picture lags the frame index by
///   `cinematicLatency` frames (AVFoundation's cinematic mode adds latency too). Translation and
///   rotation are both compensated, sub-pixel.
public enum CameraShake {
    /// Frames a cinematic stabilizer's picture lags behind (half its smoothing window).
    public static let cinematicLatency: Int64 = 15
    /// Rotation per pixel of amplitude, radians.
    public static let rotationPerPixel = 0.0015

    /// The raw shake of frame `index` (no stabilization).
    public static func shake(seed: UInt64, frame index: Int64, amplitude: Double) -> (dx: Double, dy: Double, angle: Double) {
        guard amplitude > 0 else { return (0, 0, 0) }
        var random = SeededRandom(seed: seed ^ 0x5348_414b_4500_0000 ^ (UInt64(bitPattern: index) &* 0x9e37_79b9_7f4a_7c15))
        func unit() -> Double { Double(random.next() % 2_000_001) / 1_000_000 - 1 }
        return (amplitude * unit(), amplitude * unit(), amplitude * rotationPerPixel * unit())
    }

    /// The motion of frame `index` as delivered with `mode` (an active mode: never `auto`).
    public static func motion(seed: UInt64, frame index: Int64, amplitude: Double, mode: VideoStabilizationMode) -> FrameMotion {
        switch mode {
        case .off, .auto:
            let s = shake(seed: seed, frame: index, amplitude: amplitude)
            return FrameMotion(dx: s.dx, dy: s.dy, angle: s.angle, scale: 1, sceneFrame: index)
        case .standard:
            let s = shake(seed: seed, frame: index, amplitude: amplitude)
            return FrameMotion(dx: s.dx - s.dx.rounded(), dy: s.dy - s.dy.rounded(), angle: 0, scale: 1.1, sceneFrame: index)
        case .cinematic, .cinematicExtended:
            // The picture of frame index − L, moved to the smoothed path: what remains of its motion
            // is the window's mean.
            let shown = max(0, index - cinematicLatency)
            var sum = (dx: 0.0, dy: 0.0, angle: 0.0)
            let window = (shown - cinematicLatency)...(shown + cinematicLatency)
            for n in window {
                let s = shake(seed: seed, frame: max(0, n), amplitude: amplitude)
                sum = (sum.dx + s.dx, sum.dy + s.dy, sum.angle + s.angle)
            }
            let count = Double(window.count)
            return FrameMotion(dx: sum.dx / count, dy: sum.dy / count, angle: sum.angle / count, scale: 1.2, sceneFrame: shown)
        }
    }

    /// Moves the picture in `buffer` by `motion` (nearest sample, edges repeated), through `scratch`
    /// (same format and size).
    static func apply(_ motion: FrameMotion, to buffer: PixelBuffer, scratch: PixelBuffer) {
        guard !motion.isIdentity else { return }
        for plane in 0..<buffer.planeCount {
            scratch.producerBaseAddress(ofPlane: plane).copyMemory(from: buffer.baseAddress(ofPlane: plane),
                                                                   byteCount: buffer.bytesPerRow[plane] * buffer.planeRows[plane])
        }
        let cx = Double(buffer.width) / 2, cy = Double(buffer.height) / 2
        let c = cos(motion.angle) / motion.scale, s = sin(motion.angle) / motion.scale
        for channel in CameraImaging.channels(buffer) {
            let out = buffer.producerBaseAddress(ofPlane: channel.plane).assumingMemoryBound(to: UInt8.self)
            let src = UnsafePointer(scratch.producerBaseAddress(ofPlane: channel.plane).assumingMemoryBound(to: UInt8.self))
            let stride = buffer.bytesPerRow[channel.plane]
            let sx = Double(channel.subX), sy = Double(channel.subY)
            let maxX = channel.width - 1, maxY = channel.height - 1
            for y in 0..<channel.height {
                // Output sample (x, y) sits at luma position p = ((x + 0.5)·subX, (y + 0.5)·subY); it
                // shows the sensor at c + R(angle)·(p − c)/scale − (dx, dy): linear in x along a row.
                let py = (Double(y) + 0.5) * sy - cy
                var fx = cx + (-s * py) - motion.dx + c * (0.5 * sx - cx)
                var fy = cy + c * py - motion.dy + s * (0.5 * sx - cx)
                let stepX = c * sx, stepY = s * sx
                let row = out + y * stride + channel.offset
                for x in 0..<channel.width {
                    let ix = min(max(Int((fx / sx).rounded(.down)), 0), maxX)
                    let iy = min(max(Int((fy / sy).rounded(.down)), 0), maxY)
                    row[x * channel.step] = src[iy * stride + channel.offset + ix * channel.step]
                    fx += stepX
                    fy += stepY
                }
            }
        }
    }
}
