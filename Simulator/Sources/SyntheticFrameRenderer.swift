import CaptureCore

/// Draws simulated frames. Frame `n` is a pure function of (format, seed, n): 75 % colour bars,
/// a dark textured band, a box that moves every frame (so encoders do real work), the frame-index
/// stamp and the sync flash (`FrameMarkerLayout`).
///
/// The static background is rendered once into a template; each frame copies it and paints the
/// few moving parts with row fills, so rendering costs about one memcpy per frame.
public final class SyntheticFrameRenderer: Sendable {
    public let pixelFormat: PixelFormat
    public let width: Int
    public let height: Int
    public let frameDuration: MediaTime
    public let layout: FrameMarkerLayout
    private let template: PixelBuffer
    private let boxSize: Int
    private let boxY: Int
    private let boxX0: Int
    private let boxSpeed: Int
    private let boxColor: YCbCr

    struct YCbCr: Sendable { var y: UInt8, cb: UInt8, cr: UInt8 }

    /// 75 % bars, BT.601 limited range: white, yellow, cyan, green, magenta, red, blue.
    static let bars: [YCbCr] = [
        YCbCr(y: 180, cb: 128, cr: 128), YCbCr(y: 162, cb: 44, cr: 142), YCbCr(y: 131, cb: 156, cr: 44),
        YCbCr(y: 112, cb: 72, cr: 58), YCbCr(y: 84, cb: 184, cr: 198), YCbCr(y: 65, cb: 100, cr: 212),
        YCbCr(y: 35, cb: 212, cr: 114),
    ]
    static let boxPalette: [YCbCr] = [
        YCbCr(y: 210, cb: 16, cr: 146), YCbCr(y: 170, cb: 166, cr: 16), YCbCr(y: 145, cb: 54, cr: 34),
        YCbCr(y: 106, cb: 202, cr: 222),
    ]

    public init(pixelFormat: PixelFormat, dimensions: Dimensions, frameDuration: MediaTime, seed: UInt64) throws(CaptureError) {
        guard [.nv12, .yuv420, .yuyv].contains(pixelFormat) else {
            throw .formatNotSupported("the simulator renders NV12, YU12 and YUYV, not \(pixelFormat)")
        }
        guard dimensions.width >= 64, dimensions.height >= 64, dimensions.width % 2 == 0, dimensions.height % 2 == 0 else {
            throw .formatNotSupported("simulated frames must be even-sized and at least 64x64, not \(dimensions)")
        }
        self.pixelFormat = pixelFormat
        self.width = dimensions.width
        self.height = dimensions.height
        self.frameDuration = frameDuration
        self.layout = FrameMarkerLayout(width: width, height: height)
        var random = SeededRandom(seed: seed)
        boxSize = max(16, (height / 6) & ~1)
        let barsTop = layout.stampBandHeight
        let barsBottom = height * 2 / 3
        boxY = (barsTop + 2 + random.next(below: max(1, barsBottom - barsTop - boxSize - 4))) & ~1
        boxX0 = random.next(below: width - boxSize) & ~1
        boxSpeed = (max(2, width / 160) * (1 + random.next(below: 3))) & ~1
        boxColor = Self.boxPalette[random.next(below: Self.boxPalette.count)]
        template = PixelBuffer(format: pixelFormat, width: width, height: height)
        drawBackground(random: &random)
    }

    /// Paints frame `index` into `buffer` (same format and size as the renderer).
    public func render(frame index: Int64, into buffer: PixelBuffer) {
        precondition(buffer.format == pixelFormat && buffer.width == width && buffer.height == height,
                     "buffer does not match the renderer's format")
        for plane in 0..<buffer.planeCount {
            buffer.baseAddress(ofPlane: plane).copyMemory(
                from: template.baseAddress(ofPlane: plane), byteCount: buffer.bytesPerRow[plane] * buffer.planeRows[plane])
        }
        let span = width - boxSize
        let x = Int((Int64(boxX0) + index * Int64(boxSpeed)) % Int64(span)) & ~1
        fill(buffer, rows: boxY..<(boxY + boxSize), columns: x..<(x + boxSize), color: boxColor)
        drawStamp(UInt32(truncatingIfNeeded: index), into: buffer)
        if Self.showsSyncFlash(frame: index, frameDuration: frameDuration) {
            fill(buffer, rows: layout.syncMarkerRows, columns: layout.syncMarkerColumns,
                 color: YCbCr(y: FrameMarkerLayout.lumaOne, cb: 128, cr: 128))
        }
    }

    /// True when frame `index` is the first with PTS ≥ t for some whole second t ≥ 1.
    public static func showsSyncFlash(frame index: Int64, frameDuration: MediaTime) -> Bool {
        guard index >= 1, frameDuration.isNumeric else { return false }
        let ts = Int64(frameDuration.timescale), v = frameDuration.value
        // floor(PTS(n)) > floor(PTS(n-1)), exact in integers.
        return (index * v) / ts > ((index - 1) * v) / ts
    }

    private func drawStamp(_ value: UInt32, into buffer: PixelBuffer) {
        let band = 0..<layout.stampBandHeight
        for k in 0..<FrameMarkerLayout.bitCount {
            let bit = (value >> UInt32(31 - k)) & 1
            fillLuma(buffer, rows: band, columns: layout.stampCellColumns(k),
                     value: bit == 1 ? FrameMarkerLayout.lumaOne : FrameMarkerLayout.lumaZero)
        }
    }

    private func drawBackground(random: inout SeededRandom) {
        let band = layout.stampBandHeight
        let barsBottom = height * 2 / 3
        for (i, color) in Self.bars.enumerated() {
            let columns = (i * width / Self.bars.count)..<((i + 1) * width / Self.bars.count)
            fill(template, rows: band..<barsBottom, columns: columns, color: color)
        }
        // Dark band with a seeded checkerboard of 16-pixel blocks: texture, but far below the flash level.
        let block = 16
        var y = barsBottom
        while y < height {
            var x = 0
            while x < width {
                let luma: UInt8 = 28 + UInt8(random.next(below: 24))
                fill(template, rows: y..<min(y + block, height), columns: x..<min(x + block, width),
                     color: YCbCr(y: luma, cb: 128, cr: 128))
                x += block
            }
            y += block
        }
        fill(template, rows: 0..<band, columns: 0..<width, color: YCbCr(y: FrameMarkerLayout.lumaZero, cb: 128, cr: 128))
    }

    // MARK: Painting primitives (row fills, so debug builds stay fast)

    private func fillLuma(_ buffer: PixelBuffer, rows: Range<Int>, columns: Range<Int>, value: UInt8) {
        guard !columns.isEmpty else { return }
        if pixelFormat == .yuyv {
            let base = buffer.baseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
            let stride = buffer.bytesPerRow[0]
            for row in rows {
                for x in columns { base[row * stride + x * 2] = value }
            }
            return
        }
        let base = buffer.baseAddress(ofPlane: 0)
        let stride = buffer.bytesPerRow[0]
        for row in rows {
            (base + row * stride + columns.lowerBound).initializeMemory(as: UInt8.self, repeating: value, count: columns.count)
        }
    }

    private func fill(_ buffer: PixelBuffer, rows: Range<Int>, columns: Range<Int>, color: YCbCr) {
        guard !rows.isEmpty, !columns.isEmpty else { return }
        fillLuma(buffer, rows: rows, columns: columns, value: color.y)
        let chromaRows = (rows.lowerBound / 2)..<((rows.upperBound + 1) / 2)
        let chromaColumns = (columns.lowerBound / 2)..<((columns.upperBound + 1) / 2)
        switch pixelFormat {
        case .nv12:
            let base = buffer.baseAddress(ofPlane: 1).assumingMemoryBound(to: UInt8.self)
            let stride = buffer.bytesPerRow[1]
            for row in chromaRows {
                let line = base + row * stride
                for c in chromaColumns {
                    line[c * 2] = color.cb
                    line[c * 2 + 1] = color.cr
                }
            }
        case .yuv420:
            for (plane, value) in [(1, color.cb), (2, color.cr)] {
                let base = buffer.baseAddress(ofPlane: plane)
                let stride = buffer.bytesPerRow[plane]
                for row in chromaRows {
                    (base + row * stride + chromaColumns.lowerBound)
                        .initializeMemory(as: UInt8.self, repeating: value, count: chromaColumns.count)
                }
            }
        case .yuyv:
            let base = buffer.baseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
            let stride = buffer.bytesPerRow[0]
            for row in rows {
                for c in chromaColumns {
                    base[row * stride + c * 4 + 1] = color.cb
                    base[row * stride + c * 4 + 3] = color.cr
                }
            }
        default:
            break
        }
    }
}
