import CaptureKit
import Foundation
import Testing

/// The auto controllers step on the simulator's statistics, so a faster `measure` must return the
/// very same doubles, or every recording with AE/AWB/AF would change. Checked against the
/// straightforward per-sample form it replaced, on noisy, cast, blurred frames of every format.
// Serialized and yielding per frame, like BlurRowReuseTests: CPU-bound work off the pool's threads' hold.
@Suite(.serialized) struct MeteringExactnessTests {
    /// The statistics as first written: per-sample divisions, `linearRGB`'s expressions per sample.
    struct Statistics { var meanLuma: Double?; var contrast: Double?; var linearMeans: (r: Double, g: Double, b: Double)? }

    static func reference(_ buffer: PixelBuffer, _ request: MeteringRequest, fullRange: Bool) -> Statistics {
        var m = Statistics()
        let w = buffer.width, h = buffer.height
        // (plane, offset, step, subX, subY) of Y, Cb, Cr.
        let ch: [(Int, Int, Int, Int, Int)]
        switch buffer.format {
        case .nv12: ch = [(0, 0, 1, 1, 1), (1, 0, 2, 2, 2), (1, 1, 2, 2, 2)]
        case .yuv420: ch = [(0, 0, 1, 1, 1), (1, 0, 1, 2, 2), (2, 0, 1, 2, 2)]
        default: ch = [(0, 0, 2, 1, 1), (0, 1, 4, 2, 1), (0, 3, 4, 2, 1)]
        }
        func sample(_ c: Int, _ x: Int, _ y: Int) -> Int {
            let (plane, offset, step, subX, subY) = ch[c]
            return Int(buffer.baseAddress(ofPlane: plane).load(fromByteOffset: (y / subY) * buffer.bytesPerRow[plane] + offset + (x / subX) * step, as: UInt8.self))
        }
        func toVideoLuma(_ v: Double) -> Double { fullRange ? 16 + v * 219 / 255 : v }
        func toVideoChroma(_ v: Double) -> Double { fullRange ? 128 + (v - 128) * 224 / 255 : v }
        let grid = max(4, w / 80)
        if let r = request.exposureRegion, r.x1 > r.x0, r.y1 > r.y0 {
            var sum = 0, count = 0
            for y in stride(from: r.y0, to: r.y1, by: grid / 2) { for x in stride(from: r.x0, to: r.x1, by: grid / 2) { sum += sample(0, x, y); count += 1 } }
            if count > 0 { m.meanLuma = toVideoLuma(Double(sum) / Double(count)) }
        }
        if let r = request.focusRegion, r.x1 - r.x0 > 2, r.y1 > r.y0 {
            var sum = 0, count = 0
            for y in stride(from: r.y0, to: r.y1, by: grid) {
                var x = r.x0
                while x + 2 < r.x1 { sum += abs(sample(0, x + 2, y) - sample(0, x, y)); count += 1; x += 2 }
            }
            if count > 0 { m.contrast = Double(sum) / Double(count) }
        }
        if request.grayWorld {
            let band = FrameMarkerLayout(width: w, height: h).stampBandHeight
            let table = SyntheticFrameRenderer.linearTable
            func lin(_ v: Double) -> Double { table[Int(min(max(v, 0), 1) * 4096 + 0.5)] }
            var samples: [(Double, Double, Double)] = []
            var r = 0.0, g = 0.0, b = 0.0
            for y in stride(from: band, to: h, by: grid) {
                for x in stride(from: 0, to: w, by: grid) {
                    let l = (toVideoLuma(Double(sample(0, x, y))) - 16) / 219
                    let cbp = (toVideoChroma(Double(sample(1, x, y))) - 128) / 224, crp = (toVideoChroma(Double(sample(2, x, y))) - 128) / 224
                    let rgb = (lin(l + 1.402 * crp), lin(l - 0.344_136 * cbp - 0.714_136 * crp), lin(l + 1.772 * cbp))
                    samples.append(rgb)
                    r += rgb.0; g += rgb.1; b += rgb.2
                }
            }
            if !samples.isEmpty, g > 0 {
                let castR = r / g, castB = b / g
                var nr = 0.0, ng = 0.0, nb = 0.0, count = 0
                for (sr, sg, sb) in samples where sg > 0.002 {
                    let qr = (sr / sg) / castR, qb = (sb / sg) / castB
                    if qr > 1 / 1.5 && qr < 1.5 && qb > 1 / 1.5 && qb < 1.5 { nr += sr; ng += sg; nb += sb; count += 1 }
                }
                let n = Double(samples.count)
                m.linearMeans = count * 20 >= samples.count ? (nr / Double(count), ng / Double(count), nb / Double(count)) : (r / n, g / n, b / n)
            }
        }
        return m
    }

    @Test(arguments: [PixelFormat.nv12, .yuv420, .yuyv])
    func theStatisticsAreTheSameDoublesAsTheReference(_ format: PixelFormat) async throws {
        try await Self.compareWithTheReference(format)
    }

    /// The meters and the gray world use AVX2 where the CPU has it (gathers, sums of absolute
    /// differences; the rows' ends one by one); without it, the very same doubles.
    @Test(arguments: [PixelFormat.nv12, .yuv420, .yuyv])
    func theStatisticsAreTheSameWithoutAVX2(_ format: PixelFormat) async throws {
        SyntheticFrameRenderer.allowAVX2(false)
        defer { SyntheticFrameRenderer.allowAVX2(true) }
        try await Self.compareWithTheReference(format)
    }

    static func compareWithTheReference(_ format: PixelFormat) async throws {
        for size in [Dimensions(width: 640, height: 480), Dimensions(width: 352, height: 288), Dimensions(width: 200, height: 150)] {
            let renderer = try SyntheticFrameRenderer(pixelFormat: format, dimensions: size, frameDuration: MediaTime(value: 1, timescale: 30), seed: 5)
            let buffer = PixelBuffer(format: format, width: size.width, height: size.height)
            let regions = [PixelRect(x0: 0, y0: 0, x1: size.width, y1: size.height),
                           PixelRect(x0: size.width / 3, y0: size.height / 4, x1: size.width / 3 + 101, y1: size.height / 4 + 77),
                           // Odd start, even width, ending one sample before the row's end (the C
                           // contrast sum reads two bytes at a time up to x1).
                           PixelRect(x0: 1, y0: 3, x1: size.width - 1, y1: size.height - 2)]
            var compared = 0
            for n in 0..<12 {
                var e = CameraEffects()
                e.red = 0.7 + 0.1 * Double(n % 7); e.blue = 1.4 - 0.05 * Double(n); e.green = 1.0 + 0.02 * Double(n % 3)
                e.blurRadius = n % 4; e.noiseSigma = Double(n % 3) * 3; e.zoom = 1 + 0.25 * Double(n % 5)
                e.fullRange = n % 2 == 1
                let request = MeteringRequest(exposureRegion: regions[n % 3], focusRegion: regions[(n + 1) % 3], grayWorld: true)
                _ = renderer.render(frame: Int64(n * 5), effects: e, syncFlash: false, metering: nil, into: buffer)
                let fast = SyntheticFrameRenderer.measure(buffer, request, fullRange: e.fullRange)
                let slow = Self.reference(buffer, request, fullRange: e.fullRange)
                #expect(fast.meanLuma?.bitPattern == slow.meanLuma?.bitPattern && fast.contrast?.bitPattern == slow.contrast?.bitPattern,
                        "\(format) \(size) frame \(n): \(fast) vs \(slow)")
                let f = fast.linearMeans, s = slow.linearMeans
                #expect(f != nil && f?.r.bitPattern == s?.r.bitPattern && f?.g.bitPattern == s?.g.bitPattern && f?.b.bitPattern == s?.b.bitPattern,
                        "\(format) \(size) frame \(n): \(String(describing: f)) vs \(String(describing: s))")
                compared += 1
                await Task.yield()
            }
            #expect(compared == 12)
        }
    }

    /// The gray world computes each distinct (Y, Cb, Cr) once, in a memo of 1024 entries: frames of
    /// random bytes have thousands of distinct samples, so most fall past the memo and are computed
    /// as they come. Same doubles either way.
    @Test(arguments: [PixelFormat.nv12, .yuv420, .yuyv])
    func samplesPastTheGrayWorldMemoGiveTheSameDoubles(_ format: PixelFormat) throws {
        var state: UInt64 = 17  // a fixed 64-bit LCG: the same bytes every run
        for size in [Dimensions(width: 640, height: 480), Dimensions(width: 1920, height: 1080)] {
            let buffer = PixelBuffer(format: format, width: size.width, height: size.height)
            for plane in 0..<buffer.planeCount {
                try buffer.withMutablePlane(plane) { bytes in
                    for i in bytes.indices {
                        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                        bytes[i] = UInt8(truncatingIfNeeded: state >> 33)
                    }
                }
            }
            for fullRange in [false, true] {
                let request = MeteringRequest(grayWorld: true)
                let f = SyntheticFrameRenderer.measure(buffer, request, fullRange: fullRange).linearMeans
                let s = Self.reference(buffer, request, fullRange: fullRange).linearMeans
                #expect(f != nil && f?.r.bitPattern == s?.r.bitPattern && f?.g.bitPattern == s?.g.bitPattern && f?.b.bitPattern == s?.b.bitPattern,
                        "\(format) \(size) full range \(fullRange): \(String(describing: f)) vs \(String(describing: s))")
            }
        }
    }
}
