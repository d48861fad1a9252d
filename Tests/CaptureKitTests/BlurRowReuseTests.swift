import CaptureKit
import Testing

/// A blurred frame reuses its background's row pass for every row the moving box does not cover
/// (issue 17, target 6). The frames must be the very bytes the whole blur gives.
// Serialized, and yielding after every frame: a CPU-bound test must not hold the cooperative
// pool's threads (two on CI's two cores) while the suite's timed async tests wait for them.
@Suite(.serialized) struct BlurRowReuseTests {
    static func frames(_ format: PixelFormat, _ size: Dimensions, reuse: Bool, fuseNoise: Bool = true,
                       effects: [CameraEffects]) async throws -> ([[UInt8]], Bool) {
        let renderer = try SyntheticFrameRenderer(pixelFormat: format, dimensions: size, frameDuration: MediaTime(value: 1, timescale: 30),
                                                  seed: 11, reusesBackgroundRowPass: reuse, fusesNoiseWithCopy: fuseNoise)
        let buffer = PixelBuffer(format: format, width: size.width, height: size.height)
        var out: [[UInt8]] = []
        for (n, e) in effects.enumerated() {
            _ = renderer.render(frame: Int64(n * 7), effects: e, syncFlash: n == 3, metering: nil, into: buffer)
            out.append(visibleBytes(of: buffer, format, size))
            await Task.yield()
        }
        return (out, renderer.backgroundRowPassIsCached)
    }

    /// The picture's bytes, not the rows' padding (never written, so it is whatever the allocation held).
    static func visibleBytes(of buffer: PixelBuffer, _ format: PixelFormat, _ size: Dimensions) -> [UInt8] {
        let visible = format == .yuyv ? [2 * size.width] : format == .nv12 ? [size.width, size.width] : [size.width, size.width / 2, size.width / 2]
        var bytes: [UInt8] = []
        for plane in 0..<buffer.planeCount {
            let p = buffer.baseAddress(ofPlane: plane).assumingMemoryBound(to: UInt8.self)
            for row in 0..<buffer.planeRows[plane] {
                bytes += UnsafeBufferPointer(start: p + row * buffer.bytesPerRow[plane], count: visible[plane])
            }
        }
        return bytes
    }

    /// The frames of `a` and `b` that differ, each named with `label(frame)` and its first differing byte
    /// (compared here, not by #expect on the arrays, so a failure says where).
    static func differences(_ a: [[UInt8]], _ b: [[UInt8]], _ label: (Int) -> String) -> [String] {
        a.indices.compactMap { n in
            guard let i = a[n].indices.first(where: { a[n][$0] != b[n][$0] }) else { return nil }
            return "frame \(n) (\(label(n))) at byte \(i): \(a[n][i]) vs \(b[n][i])"
        }
    }

    @Test(arguments: [PixelFormat.nv12, .yuv420, .yuyv])
    func reusedRowsGiveTheSameBytesAsBlurringTheWholeFrame(_ format: PixelFormat) async throws {
        // Radii 1, 2, 4 (radius 1 leaves 4:2:0 chroma unblurred), a zoom that moves and clips the box,
        // a cast that changes the background mid-run, noise on top; the box moves between frames.
        var effects: [CameraEffects] = []
        for radius in [1, 2, 4] {
            for zoom in [1.0, 3.0] {
                for cast in [1.0, 1.25] {
                    var e = CameraEffects()
                    e.blurRadius = radius; e.zoom = zoom; e.red = cast; e.noiseSigma = radius == 2 ? 2 : 0
                    effects += [e, e, e]  // the background is blurred ahead from its second frame on
                }
            }
        }
        // 640x480's rows have no padding, so rows are reused; 352x288's luma rows are padded to 384 bytes,
        // and a partial copy would leave stale padding, so it blurs whole frames (same bytes).
        // (YUYV's 704-byte rows at 352 are unpadded, so it reuses rows at both sizes.)
        for (size, reuses) in [(Dimensions(width: 640, height: 480), true), (Dimensions(width: 352, height: 288), format == .yuyv)] {
            let (whole, wholeCached) = try await Self.frames(format, size, reuse: false, effects: effects)
            let (reused, reusedCached) = try await Self.frames(format, size, reuse: true, effects: effects)
            #expect(!wholeCached)
            #expect(reusedCached == reuses, "the background's row pass was \(reusedCached ? "" : "not ")reused at \(size) \(format)")
            let differing = Self.differences(whole, reused) { "radius \(effects[$0].blurRadius), zoom \(effects[$0].zoom)" }
            #expect(differing.isEmpty, "\(size) \(format): \(differing.count) frames differ, first: \(differing.prefix(3))")
        }
    }

    /// A noisy, sharp NV12/I420 frame writes its luma as background + noise in one pass instead of
    /// copying the background and then adding noise: the frames must be the same bytes (every
    /// sensor-noise level the cameras use, a box the zoom moves and clips, a cast change, sync flashes).
    @Test(arguments: [PixelFormat.nv12, .yuv420, .yuyv])
    func noiseFromTheBackgroundGivesTheSameBytesAsCopyingThenNoising(_ format: PixelFormat) async throws {
        var effects: [CameraEffects] = []
        for sigma in [0.0, 2, 6] {
            for zoom in [1.0, 8.0] {
                for cast in [1.0, 1.3] {
                    var e = CameraEffects()
                    e.noiseSigma = sigma; e.zoom = zoom; e.red = cast; e.fullRange = sigma == 6
                    effects += [e, e]
                }
            }
        }
        // 640x480 has unpadded luma rows (fused); 352x288's are padded (copied then noised).
        for size in [Dimensions(width: 640, height: 480), Dimensions(width: 352, height: 288)] {
            let (separate, _) = try await Self.frames(format, size, reuse: true, fuseNoise: false, effects: effects)
            let (fused, _) = try await Self.frames(format, size, reuse: true, fuseNoise: true, effects: effects)
            let differing = Self.differences(separate, fused) { "σ \(effects[$0].noiseSigma), zoom \(effects[$0].zoom)" }
            #expect(differing.isEmpty, "\(size) \(format): \(differing.count) frames differ, first: \(differing.prefix(3))")
            // Noise really is on: neighbouring frames of the same effects differ beyond the box and stamp.
            #expect(separate[2] != separate[3] || effects[2].noiseSigma == 0)
        }
    }
}
