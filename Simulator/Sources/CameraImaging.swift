import CCaptureShims
import CaptureCore

/// The per-pixel parts of the simulated camera: separable box blur (defocus) and tiled seeded
/// noise, whose loops are small C functions in CCaptureShims that clang vectorises, and the
/// statistics the auto controllers read (mean luma, contrast, gray-world means).
enum CameraImaging {
    /// One colour channel of a frame: where its samples are and how far apart.
    struct Channel {
        var plane: Int
        var offset: Int
        var step: Int
        var width: Int
        var height: Int
        /// Horizontal and vertical subsampling relative to luma.
        var subX: Int
        var subY: Int
    }

    static func channels(_ buffer: PixelBuffer) -> [Channel] {
        let w = buffer.width, h = buffer.height
        switch buffer.format {
        case .nv12:
            return [Channel(plane: 0, offset: 0, step: 1, width: w, height: h, subX: 1, subY: 1),
                    Channel(plane: 1, offset: 0, step: 2, width: w / 2, height: h / 2, subX: 2, subY: 2),
                    Channel(plane: 1, offset: 1, step: 2, width: w / 2, height: h / 2, subX: 2, subY: 2)]
        case .yuv420:
            return [Channel(plane: 0, offset: 0, step: 1, width: w, height: h, subX: 1, subY: 1),
                    Channel(plane: 1, offset: 0, step: 1, width: w / 2, height: h / 2, subX: 2, subY: 2),
                    Channel(plane: 2, offset: 0, step: 1, width: w / 2, height: h / 2, subX: 2, subY: 2)]
        case .yuyv:
            return [Channel(plane: 0, offset: 0, step: 2, width: w, height: h, subX: 1, subY: 1),
                    Channel(plane: 0, offset: 1, step: 4, width: w / 2, height: h, subX: 2, subY: 1),
                    Channel(plane: 0, offset: 3, step: 4, width: w / 2, height: h, subX: 2, subY: 1)]
        default:
            return []
        }
    }

    // MARK: Defocus

    /// Box-blurs every channel with `radius` (luma pixels; chroma scaled by its subsampling): a
    /// separable box in integer arithmetic, window sums from prefix sums along rows and running
    /// column sums down the plane, each pass rounded as `(sum · round(65536 / (2r + 1)) + 32768) >> 16`
    /// with edges clamped. The loops are C (`ck_box_blur_rows` / `ck_box_blur_columns`) so they vectorise.
    ///
    /// With `reusing`, the frame is its background except in `drawnRows`: only those rows go
    /// through the row pass, the column pass reads every other row from the background's own row
    /// pass and runs only where its window meets a drawn row; the rows beyond are copied from the
    /// background blurred whole. Each output depends only on the rows in its window, so the frame
    /// is bit-identical to blurring it whole.
    static func blur(_ buffer: PixelBuffer, radius: Int, reusing background: (blurred: BlurredBackground, drawnRows: Range<Int>)? = nil) {
        for plane in blurPlan(buffer, radius: radius) {
            let base = buffer.producerBaseAddress(ofPlane: plane.index).assumingMemoryBound(to: UInt8.self)
            let stride = buffer.bytesPerRow[plane.index]
            let rowBytes = plane.rowBytes, height = plane.height
            // Reused between frames rather than allocated per frame (2 MB of 8-bit row means at
            // 1080p). Measured, the reuse alone changed little; the fused passes did the rest.
            let tmpBytes = (rowBytes * height + 63) & ~63
            let scratchBytes = 4 * ((rowBytes + 8 * radius + 8 + 15) & ~15)
            let work = BlurScratch.take(bytes: tmpBytes + scratchBytes + 4 * rowBytes + 64 + 8 * height)
            defer { BlurScratch.give(work) }
            let tmp = work.base.assumingMemoryBound(to: UInt8.self)
            let scratch = (work.base + tmpBytes).assumingMemoryBound(to: UInt32.self)
            let sums = scratch + scratchBytes / 4
            let rows = (work.base + tmpBytes + scratchBytes + 4 * rowBytes + 64).assumingMemoryBound(to: UnsafePointer<UInt8>?.self)
            // The rows this call blurs itself: all, or those drawn over a background blurred ahead.
            let drawn = background.map { plane.rows(ofLumaRows: $0.drawnRows) } ?? 0..<height
            if !drawn.isEmpty {
                rowPass(plane, radius: radius, from: base + drawn.lowerBound * stride, stride: stride, rows: drawn.count,
                        into: tmp + drawn.lowerBound * rowBytes, outStride: rowBytes, scratch: scratch)
            }
            guard let background else {
                for r in 0..<height { rows[r] = UnsafePointer(tmp + r * rowBytes) }
                ck_box_blur_columns(base, stride, Int32(rowBytes), Int32(height), Int32(plane.ry), rows, 0, Int32(height), sums)
                continue
            }
            let rowBlurred = background.blurred.rows.baseAddress(ofPlane: plane.index).assumingMemoryBound(to: UInt8.self)
            for r in 0..<height {
                rows[r] = drawn.contains(r) ? UnsafePointer(tmp + r * rowBytes) : rowBlurred + r * stride
            }
            // Outputs whose window meets a drawn row; the others are the background's own.
            let touched = drawn.isEmpty ? 0..<0 : max(drawn.lowerBound - plane.ry, 0)..<min(drawn.upperBound + plane.ry, height)
            let whole = background.blurred.whole.baseAddress(ofPlane: plane.index)
            for untouched in [0..<(touched.isEmpty ? height : touched.lowerBound), (touched.isEmpty ? height : touched.upperBound)..<height]
            where !untouched.isEmpty {
                (UnsafeMutableRawPointer(base) + untouched.lowerBound * stride).copyMemory(
                    from: whole + untouched.lowerBound * stride, byteCount: untouched.count * stride)
            }
            ck_box_blur_columns(base, stride, Int32(rowBytes), Int32(height), Int32(plane.ry), rows,
                                Int32(touched.lowerBound), Int32(touched.upperBound), sums)
        }
    }

    /// A background blurred ahead, once: after the row pass (`rows`) and after both passes (`whole`).
    /// Planes the blur leaves alone are never read from them.
    struct BlurredBackground: Sendable {
        let rows: PixelBuffer
        let whole: PixelBuffer

        init(_ background: PixelBuffer, radius: Int) {
            rows = CameraImaging.rowPass(of: background, radius: radius)
            whole = PixelBuffer(format: background.format, width: background.width, height: background.height)
            for plane in CameraImaging.blurPlan(background, radius: radius) {
                let stride = rows.bytesPerRow[plane.index]
                let source = rows.baseAddress(ofPlane: plane.index).assumingMemoryBound(to: UInt8.self)
                let pointers = (0..<plane.height).map { Optional(source + $0 * stride) }
                let sums = UnsafeMutablePointer<UInt32>.allocate(capacity: plane.rowBytes)
                defer { sums.deallocate() }
                ck_box_blur_columns(whole.producerBaseAddress(ofPlane: plane.index).assumingMemoryBound(to: UInt8.self), stride,
                                    Int32(plane.rowBytes), Int32(plane.height), Int32(plane.ry), pointers, 0, Int32(plane.height), sums)
            }
        }
    }

    /// Copies, plane by plane, the rows `rows(plane)` of `source` into `target` (same layout).
    static func copyRows(of source: PixelBuffer, into target: PixelBuffer, _ rows: (Int) -> Range<Int>) {
        for plane in 0..<source.planeCount {
            let stride = source.bytesPerRow[plane], range = rows(plane)
            (target.producerBaseAddress(ofPlane: plane) + range.lowerBound * stride).copyMemory(
                from: source.baseAddress(ofPlane: plane) + range.lowerBound * stride, byteCount: stride * range.count)
        }
    }

    /// Copies the pixels of `rect` (luma coordinates) from `source` into `target` (same layout),
    /// with the chroma samples the renderer's fills touch for it (rounded out to whole 2×2 blocks).
    /// `luma: false` leaves a planar layout's luma plane alone (an interleaved one has no other).
    static func copyRect(_ rect: PixelRect, of source: PixelBuffer, into target: PixelBuffer, luma: Bool = true) {
        let x0 = max(rect.x0, 0), x1 = min(rect.x1, source.width), y0 = max(rect.y0, 0), y1 = min(rect.y1, source.height)
        guard x0 < x1, y0 < y1 else { return }
        func copy(_ plane: Int, rows: Range<Int>, bytes: Range<Int>) {
            let stride = source.bytesPerRow[plane]
            let from = source.baseAddress(ofPlane: plane) + bytes.lowerBound, to = target.producerBaseAddress(ofPlane: plane) + bytes.lowerBound
            for row in rows { (to + row * stride).copyMemory(from: from + row * stride, byteCount: bytes.count) }
        }
        let chromaRows = (y0 / 2)..<((y1 + 1) / 2), c0 = x0 / 2, c1 = (x1 + 1) / 2
        switch source.format {
        case .nv12:
            if luma { copy(0, rows: y0..<y1, bytes: x0..<x1) }
            copy(1, rows: chromaRows, bytes: (c0 * 2)..<(c1 * 2))
        case .yuv420:
            if luma { copy(0, rows: y0..<y1, bytes: x0..<x1) }
            copy(1, rows: chromaRows, bytes: c0..<c1)
            copy(2, rows: chromaRows, bytes: c0..<c1)
        case .yuyv:
            copy(0, rows: y0..<y1, bytes: (c0 * 4)..<(c1 * 4))
        default:
            copyPlanes(of: source, into: target)
        }
    }

    /// Copies every plane of `source` into `target` (same layout).
    static func copyPlanes(of source: PixelBuffer, into target: PixelBuffer) {
        for plane in 0..<source.planeCount {
            target.producerBaseAddress(ofPlane: plane).copyMemory(
                from: source.baseAddress(ofPlane: plane), byteCount: source.bytesPerRow[plane] * source.planeRows[plane])
        }
    }

    /// One plane the blur touches: its channels and the bytes of a row they span.
    struct BlurPlane {
        let index: Int
        let members: [Channel]
        let interleaved: Bool
        let rowBytes: Int
        let height: Int
        let ry: Int
        let subY: Int

        /// The plane's rows that hold any of the luma rows `lumaRows` (as the renderer fills chroma).
        func rows(ofLumaRows lumaRows: Range<Int>) -> Range<Int> {
            let lower = min(max(lumaRows.lowerBound / subY, 0), height)
            let upper = min(max((lumaRows.upperBound + subY - 1) / subY, lower), height)
            return lower..<upper
        }
    }

    /// The planes `blur` changes at `radius` (a plane whose radius rounds to 0 both ways is left as it is).
    static func blurPlan(_ buffer: PixelBuffer, radius: Int) -> [BlurPlane] {
        guard radius > 0 else { return [] }
        let all = channels(buffer)
        return (0..<buffer.planeCount).compactMap { plane in
            let members = all.filter { $0.plane == plane }
            guard let first = members.first else { return nil }
            // Channels sharing a plane share their vertical subsampling (NV12's CbCr, YUYV's samples).
            let ry = radius / first.subY
            guard ry > 0 || members.contains(where: { radius / $0.subX > 0 }) else { return nil }
            // Channels that fill the row interleaved (NV12's CbCr) go in one call, as lanes.
            let interleaved = members.count == first.step && members.map(\.offset).sorted() == Array(0..<first.step)
                && members.allSatisfy { $0.step == first.step && $0.subX == first.subX && $0.width == first.width }
            return BlurPlane(index: plane, members: members, interleaved: interleaved,
                             rowBytes: members.map { $0.offset + ($0.width - 1) * $0.step + 1 }.max() ?? 0,
                             height: first.height, ry: ry, subY: first.subY)
        }
    }

    /// True when `blur(_:radius:reusing:)` can stand for a whole blur of this layout: every plane
    /// it blurs is written whole (rows without padding, which a partial background copy would
    /// otherwise leave as the buffer last held them).
    static func canReuseRowPass(_ buffer: PixelBuffer, radius: Int) -> Bool {
        blurPlan(buffer, radius: radius).allSatisfy { buffer.bytesPerRow[$0.index] == $0.rowBytes }
    }

    /// The row pass of the blur over every row of `background`, into a new buffer of its layout
    /// (planes the blur does not touch are left as allocated: they are never read).
    static func rowPass(of background: PixelBuffer, radius: Int) -> PixelBuffer {
        let out = PixelBuffer(format: background.format, width: background.width, height: background.height)
        for plane in blurPlan(background, radius: radius) {
            let scratch = UnsafeMutablePointer<UInt32>.allocate(capacity: (plane.rowBytes + 8 * radius + 8 + 15) & ~15)
            defer { scratch.deallocate() }
            rowPass(plane, radius: radius, from: background.baseAddress(ofPlane: plane.index).assumingMemoryBound(to: UInt8.self),
                    stride: background.bytesPerRow[plane.index], rows: plane.height,
                    into: out.producerBaseAddress(ofPlane: plane.index).assumingMemoryBound(to: UInt8.self),
                    outStride: out.bytesPerRow[plane.index], scratch: scratch)
        }
        return out
    }

    private static func rowPass(_ plane: BlurPlane, radius: Int, from base: UnsafePointer<UInt8>, stride: Int, rows: Int,
                                into out: UnsafeMutablePointer<UInt8>, outStride: Int, scratch: UnsafeMutablePointer<UInt32>) {
        let first = plane.members[0]
        for c in plane.interleaved ? [first] : plane.members {
            let offset = plane.interleaved ? 0 : c.offset
            ck_box_blur_rows(base + offset, stride, Int32(c.step), Int32(plane.interleaved ? c.step : 1), Int32(c.width), Int32(rows),
                             Int32(radius / c.subX), out + offset, outStride, scratch)
        }
    }

    /// Blur work memory, kept for the next frame (one per concurrent blur; a size that grows
    /// replaces it). Taken and given back under a lock, so cameras on several threads each get their own.
    // unchecked: raw scratch memory, used only by the thread that took it from `free` until it gives it back.
    final class BlurScratch: @unchecked Sendable {
        // Owned by whoever took it from `free`; never shared while taken.
        let base: UnsafeMutableRawPointer
        let bytes: Int
        init(bytes: Int) {
            self.bytes = bytes
            base = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        }
        deinit { base.deallocate() }

        private static let free = Locked<[BlurScratch]>([])
        static func take(bytes: Int) -> BlurScratch {
            free.withLock { f in
                if let i = f.firstIndex(where: { $0.bytes >= bytes }) { return f.remove(at: i) }
                if !f.isEmpty { f.removeLast() }  // too small: let it go
                return nil
            } ?? BlurScratch(bytes: bytes)
        }
        static func give(_ scratch: BlurScratch) {
            free.withLock { f in if f.count < 4 { f.append(scratch) } }
        }
    }

    // MARK: Noise

    static let tileBits = 16
    static let tileMask = (1 << tileBits) - 1
    /// Approximately Gaussian (sum of four uniforms) with a standard deviation of 32. Made in C
    /// (`ck_noise_tile`, SeededRandom's SplitMix64 seeded 0x4E4F…494C): a process's first noisy
    /// frame waits for its 65 536 entries.
    static let noiseTile: [Int8] = [Int8](unsafeUninitializedCapacity: 1 << tileBits) { tile, made in
        ck_noise_tile(tile.baseAddress, Int32(tile.count), 0x4E4F_4953_4554_494C)
        made = tile.count
    }

    /// The noise tile scaled to one sigma: code-value deltas t, as the two byte tiles `ck_add_noise`
    /// takes (up = t where t > 0, down = −t where t < 0, each clamped to 255).
    struct NoiseTiles: Sendable {
        let up: [UInt8]
        let down: [UInt8]
        func withPointers<R>(_ body: (UnsafePointer<UInt8>, UnsafePointer<UInt8>) -> R) -> R {
            up.withUnsafeBufferPointer { u in down.withUnsafeBufferPointer { d in body(u.baseAddress!, d.baseAddress!) } }
        }
    }

    /// Kept for the last sigma asked for.
    private static let scaledTile = Locked<(sigma: Double, tiles: NoiseTiles)?>(nil)

    static func tiles(sigma: Double) -> NoiseTiles {
        scaledTile.withLock { cached in
            if let cached, cached.sigma == sigma { return cached.tiles }
            var delta = [Int](repeating: 0, count: 256)
            for t in 0..<256 { delta[t] = Int(Int16(clamping: Int((Double(t - 128) * sigma / 32).rounded()))) }
            // Per tile value, then per entry: one lookup each.
            let upOf = delta.map { UInt8(min(max($0, 0), 255)) }, downOf = delta.map { UInt8(min(max(-$0, 0), 255)) }
            func tile(_ of: [UInt8]) -> [UInt8] {
                [UInt8](unsafeUninitializedCapacity: noiseTile.count) { out, made in
                    noiseTile.withUnsafeBufferPointer { t in of.withUnsafeBufferPointer { o in
                        for i in t.indices { out[i] = o[Int(t[i]) &+ 128] }
                    } }
                    made = noiseTile.count
                }
            }
            let tiles = NoiseTiles(up: tile(upOf), down: tile(downOf))
            cached = (sigma, tiles)
            return tiles
        }
    }

    /// Adds luma noise of standard deviation `sigma` code values; the tile window depends only on (seed, frame).
    static func addNoise(_ buffer: PixelBuffer, sigma: Double, seed: UInt64, frame: Int64) {
        guard let luma = channels(buffer).first else { return }
        let (start, rowJump) = noiseWindow(seed: seed, frame: frame)
        let base = buffer.producerBaseAddress(ofPlane: luma.plane).assumingMemoryBound(to: UInt8.self) + luma.offset
        tiles(sigma: sigma).withPointers { up, down in
            ck_add_noise(base, buffer.bytesPerRow[luma.plane], Int32(luma.step), Int32(luma.width), Int32(luma.height),
                         up, down, Int32(tileMask), Int32(start), Int32(rowJump))
        }
    }

    /// `addNoise` on a buffer whose luma outside `inPlace` (luma coordinates) has not been written
    /// yet: those samples are read from `source` (same layout, e.g. the background) and written
    /// noised in one pass; the samples in `inPlace` get the noise in place. Same bytes as copying
    /// the luma and then `addNoise`. For layouts where luma fills a plane of its own (`canNoiseFromSource`).
    static func addNoise(_ buffer: PixelBuffer, sigma: Double, seed: UInt64, frame: Int64, from source: PixelBuffer, inPlace: PixelRect) {
        guard let luma = channels(buffer).first else { return }
        precondition(source.format == buffer.format && source.bytesPerRow == buffer.bytesPerRow && canNoiseFromSource(buffer),
                     "the noise source must share the buffer's layout")
        let (start, rowJump) = noiseWindow(seed: seed, frame: frame)
        let base = buffer.producerBaseAddress(ofPlane: luma.plane).assumingMemoryBound(to: UInt8.self) + luma.offset
        let from = source.baseAddress(ofPlane: luma.plane).assumingMemoryBound(to: UInt8.self) + luma.offset
        let stride = buffer.bytesPerRow[luma.plane]
        let rows = (inPlace.y0..<max(inPlace.y0, inPlace.y1)).clamped(to: 0..<luma.height)
        tiles(sigma: sigma).withPointers { up, down in
            for range in [0..<rows.lowerBound, rows.upperBound..<luma.height] {
                ck_add_noise_rows(from, stride, base, stride, Int32(luma.step), Int32(luma.width), Int32(range.lowerBound),
                                  Int32(range.upperBound), up, down, Int32(tileMask), Int32(start), Int32(rowJump))
            }
            ck_add_noise_rows_around(from, stride, base, stride, Int32(luma.step), Int32(luma.width), Int32(rows.lowerBound),
                                     Int32(rows.upperBound), Int32(inPlace.x0), Int32(inPlace.x1), up, down, Int32(tileMask),
                                     Int32(start), Int32(rowJump))
        }
    }

    /// Whether luma is alone in plane 0 (NV12, I420) and its rows have no padding, so writing its
    /// samples writes every byte of those rows (a pool buffer's padding would otherwise keep
    /// whatever an earlier frame left, as in `canReuseRowPass`).
    static func canNoiseFromSource(_ buffer: PixelBuffer) -> Bool {
        let ch = channels(buffer)
        guard let luma = ch.first, luma.plane == 0, luma.offset == 0, luma.step == 1,
              buffer.bytesPerRow[0] == luma.width else { return false }
        return !ch.dropFirst().contains { $0.plane == luma.plane }
    }

    /// The tile's start and row jump for (seed, frame).
    private static func noiseWindow(seed: UInt64, frame: Int64) -> (start: Int, rowJump: Int) {
        var random = SeededRandom(seed: seed ^ (UInt64(bitPattern: frame) &* 0x9E37_79B9_7F4A_7C15) ^ 0xA5A5_5A5A)
        let start = Int(random.next() & UInt64(tileMask))
        return (start, Int(random.next() & UInt64(tileMask)) | 1)
    }

    // MARK: Statistics

    /// `SyntheticFrameRenderer.linearRGB`'s (y − 16) / 219 and (c − 128) / 224 for every code value,
    /// after the full-range mapping when the frame is full range.
    struct CodeTerms: Sendable {
        let yp: [Double]
        let cp: [Double]
        init(fullRange: Bool) {
            func toVideoLuma(_ v: Double) -> Double { fullRange ? 16 + v * 219 / 255 : v }
            func toVideoChroma(_ v: Double) -> Double { fullRange ? 128 + (v - 128) * 224 / 255 : v }
            yp = (0..<256).map { (toVideoLuma(Double($0)) - 16) / 219 }
            cp = (0..<256).map { (toVideoChroma(Double($0)) - 128) / 224 }
        }
    }

    /// See `SyntheticFrameRenderer.allowAVX2`.
    static func allowAVX2(_ allowed: Bool) { ck_allow_avx2(allowed ? 1 : 0) }

    static let videoRangeTerms = CodeTerms(fullRange: false)
    static let fullRangeTerms = CodeTerms(fullRange: true)

    static func measure(_ buffer: PixelBuffer, _ request: MeteringRequest, fullRange: Bool) -> FrameMeasurements {
        var m = FrameMeasurements()
        let ch = channels(buffer)
        guard ch.count == 3 else { return m }
        let lumaBase = buffer.baseAddress(ofPlane: ch[0].plane).assumingMemoryBound(to: UInt8.self) + ch[0].offset
        let lumaStride = buffer.bytesPerRow[ch[0].plane], lumaStep = ch[0].step
        func toVideoLuma(_ v: Double) -> Double { fullRange ? 16 + v * 219 / 255 : v }
        func toVideoChroma(_ v: Double) -> Double { fullRange ? 128 + (v - 128) * 224 / 255 : v }
        // Sample grids scale with the frame, about 80 samples across, so statistics cost the same at any size.
        let grid = max(4, buffer.width / 80)
        if let r = request.exposureRegion, r.x1 > r.x0, r.y1 > r.y0 {
            var count: Int64 = 0
            let sum = ck_grid_sum(lumaBase, lumaStride, Int32(lumaStep), Int32(r.x0), Int32(r.x1), Int32(grid / 2),
                                  Int32(r.y0), Int32(r.y1), Int32(grid / 2), &count)
            if count > 0 { m.meanLuma = toVideoLuma(Double(sum) / Double(count)) }
        }
        if let r = request.focusRegion, r.x1 - r.x0 > 2, r.y1 > r.y0 {
            var count: Int64 = 0
            let sum = ck_contrast_sum(lumaBase, lumaStride, Int32(lumaStep), Int32(lumaStride - ch[0].offset), Int32(r.x0), Int32(r.x1),
                                      Int32(r.y0), Int32(r.y1), Int32(grid), &count)
            if count > 0 { m.contrast = Double(sum) / Double(count) }
        }
        if request.grayWorld {
            // Gray world over the near-neutral surfaces: first the mean colour (the light's cast), then
            // the mean of the samples whose chromaticity is within a factor 1.5 of it, so saturated
            // objects (the bars, the moving box) do not pull the balance.
            let band = FrameMarkerLayout(width: buffer.width, height: buffer.height).stampBandHeight
            let cb = ch[1], cr = ch[2]
            let cbBase = buffer.baseAddress(ofPlane: cb.plane).assumingMemoryBound(to: UInt8.self) + cb.offset
            let crBase = buffer.baseAddress(ofPlane: cr.plane).assumingMemoryBound(to: UInt8.self) + cr.offset
            let cbStride = buffer.bytesPerRow[cb.plane], crStride = buffer.bytesPerRow[cr.plane]
            // The sampled columns' byte offsets in each plane, once per frame (no division per sample).
            let columnCount = (buffer.width + grid - 1) / grid
            let rowCount = band < buffer.height ? (buffer.height - band + grid - 1) / grid : 0
            // One allocation for the offsets, one for the samples.
            let offsets = UnsafeMutablePointer<Int>.allocate(capacity: 3 * columnCount)
            defer { offsets.deallocate() }
            let lumaColumns = offsets, cbColumns = offsets + columnCount, crColumns = offsets + 2 * columnCount
            for i in 0..<columnCount {
                let x = i * grid
                lumaColumns[i] = x * lumaStep
                cbColumns[i] = (x / cb.subX) * cb.step
                crColumns[i] = (x / cr.subX) * cr.step
            }
            // The C loop's scratch: each distinct sample's linear R, G, B and whether it is near
            // neutral, and each sample's entry.
            let capacity = max(1, columnCount * rowCount)
            let values = UnsafeMutablePointer<Double>.allocate(capacity: 3 * capacity)
            defer { values.deallocate() }
            let indices = UnsafeMutablePointer<Int32>.allocate(capacity: capacity)
            defer { indices.deallocate() }
            let keep = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            defer { keep.deallocate() }
            // linearRGB's terms per code value are evaluated once (CodeTerms); the C loop then applies
            // linearRGB's expressions to them, once per distinct sample, and sums in row order: the
            // same doubles as per-sample Swift.
            let terms = fullRange ? Self.fullRangeTerms : Self.videoRangeTerms
            var sums = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
            var neutral: Int32 = 0
            let count = SyntheticFrameRenderer.linearTable.withUnsafeBufferPointer { table in
                terms.yp.withUnsafeBufferPointer { yp in
                    terms.cp.withUnsafeBufferPointer { cp in
                        withUnsafeMutablePointer(to: &sums) {
                            $0.withMemoryRebound(to: Double.self, capacity: 6) { out in
                                Int(ck_gray_world(lumaBase, lumaStride, cbBase, cbStride, Int32(cb.subY), crBase, crStride, Int32(cr.subY),
                                                  lumaColumns, cbColumns, crColumns, Int32(columnCount), Int32(band), Int32(buffer.height),
                                                  Int32(grid), yp.baseAddress!, cp.baseAddress!, table.baseAddress!, values, indices, keep,
                                                  Int32(capacity), &neutral, out))
                            }
                        }
                    }
                }
            }
            let (r, g, b, nr, ng, nb) = sums
            if count > 0, g > 0 {
                let n = Double(count), kept = Int(neutral)
                m.linearMeans = kept * 20 >= count ? (nr / Double(kept), ng / Double(kept), nb / Double(kept)) : (r / n, g / n, b / n)
            }
        }
        return m
    }
}
