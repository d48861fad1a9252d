import CaptureCore
import Foundation
import Synchronization

/// Draws simulated frames. Frame `n` is a pure function of (format, seed, n, camera effects): a
/// scene in linear light — 75 % colour bars, an 18 % grey card, a dark textured band and a box that
/// moves every frame — seen through the camera (exposure, white balance, torch, zoom, defocus, noise),
/// then the frame-index stamp and the sync flash (`FrameMarkerLayout`), drawn last and untouched.
///
/// The scene is a list of flat rectangles with linear-light colours, so exposure and white balance
/// act on a small palette (exact, and cheap), zoom transforms rectangles, and only defocus
/// (separable running-sum box blur) and noise (precomputed tiles) touch every pixel — and only when
/// they are not neutral. The background for the current effects is cached, so a steady camera
/// costs about one memcpy per frame, as before.
public final class SyntheticFrameRenderer: Sendable {
    public let pixelFormat: PixelFormat
    public let width: Int
    public let height: Int
    public let frameDuration: MediaTime
    public let layout: FrameMarkerLayout
    public let seed: UInt64
    let rects: [SceneRect]
    let palette: [LinearColor]
    private let boxSize: Int
    private let boxY: Int
    private let boxX0: Int
    private let boxSpeed: Int
    private let boxColorIndex: Int
    /// The 18 % grey card (scene coordinates, zoom 1).
    public let greyCard: PixelRect
    /// The textured (checkerboard) band.
    public let texturedBand: PixelRect
    let cache = Locked<BackgroundCache?>(nil)
    /// The copy a shaken or stabilized frame is moved from (made on first use).
    private let motionScratch = Locked<PixelBuffer?>(nil)
    let painter = SceneItemPainter()

    struct YCbCr: Sendable, Hashable { var y: UInt8, cb: UInt8, cr: UInt8 }
    struct LinearColor: Sendable { var r: Double, g: Double, b: Double }
    struct SceneRect: Sendable { var x0, y0, x1, y1: Int; var color: Int }

    final class BackgroundCache: Sendable {
        // Used under the renderer's `cache` mutex (`blurred` is made there, on second use); the
        // mutable parts have their own (uncontended) lock and atomic so the type is checked.
        let key: CameraEffects
        let buffer: PixelBuffer
        /// The background blurred at `key.blurRadius`, for frames that reuse it: made when a second
        /// frame uses this background (while the effects change every frame, as an AF sweep's
        /// radius does, blurring it ahead would only add work).
        let blurred = Locked<CameraImaging.BlurredBackground?>(nil)
        let uses = Atomic<Int>(0)
        init(key: CameraEffects, buffer: PixelBuffer) { self.key = key; self.buffer = buffer }
    }

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
    /// Reflectance of the grey card.
    public static let greyCardReflectance = 0.18
    /// Display transfer: code = 16 + 219 · linear^(1/gamma) (video range).
    public static let gamma = 2.2

    /// Whether a blurred frame reuses its background blurred once (`render`); off only to check
    /// that the frames are the same either way.
    let reusesBackgroundRowPass: Bool
    /// Whether a noisy, sharp frame writes its luma as background + noise in one pass (`render`);
    /// off only to check that the frames are the same either way.
    let fusesNoiseWithCopy: Bool
    /// Whether a plain frame puts back only what the buffer's previous plain frame drew over the
    /// background (`drawPlainBackground`); off only to check that the frames are the same either way.
    let redrawsOnlyChanges: Bool

    /// The statistics `render` measures, over any buffer (for checking them against a reference).
    package static func measure(_ buffer: PixelBuffer, _ request: MeteringRequest, fullRange: Bool) -> FrameMeasurements {
        CameraImaging.measure(buffer, request, fullRange: fullRange)
    }

    /// Whether the statistics use AVX2 (gathers, sums of absolute differences) where the CPU has it;
    /// off only to check that the statistics are the same either way.
    package static func allowAVX2(_ allowed: Bool) { CameraImaging.allowAVX2(allowed) }

    /// True once the cached background has been blurred ahead (a blurred frame reused it).
    package var backgroundRowPassIsCached: Bool { cache.withLock { $0?.blurred.withLock { $0 != nil } ?? false } }

    public convenience init(pixelFormat: PixelFormat, dimensions: Dimensions, frameDuration: MediaTime, seed: UInt64) throws(CaptureError) {
        try self.init(pixelFormat: pixelFormat, dimensions: dimensions, frameDuration: frameDuration, seed: seed, reusesBackgroundRowPass: true)
    }

    package init(pixelFormat: PixelFormat, dimensions: Dimensions, frameDuration: MediaTime, seed: UInt64,
                 reusesBackgroundRowPass: Bool, fusesNoiseWithCopy: Bool = true, redrawsOnlyChanges: Bool = true) throws(CaptureError) {
        self.reusesBackgroundRowPass = reusesBackgroundRowPass
        self.redrawsOnlyChanges = redrawsOnlyChanges
        self.fusesNoiseWithCopy = fusesNoiseWithCopy
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
        self.seed = seed
        self.layout = FrameMarkerLayout(width: width, height: height)
        var random = SeededRandom(seed: seed)
        boxSize = max(16, (height / 6) & ~1)
        let barsTop = layout.stampBandHeight
        let barsBottom = height * 2 / 3
        boxY = (barsTop + 2 + random.next(below: max(1, barsBottom - barsTop - boxSize - 4))) & ~1
        boxX0 = random.next(below: width - boxSize) & ~1
        boxSpeed = (max(2, width / 160) * (1 + random.next(below: 3))) & ~1
        let boxChoice = random.next(below: Self.boxPalette.count)

        var palette: [LinearColor] = [LinearColor(r: 0, g: 0, b: 0)]  // 0: black, outside the scene
        var rects: [SceneRect] = []
        for (i, color) in Self.bars.enumerated() {
            palette.append(Self.linear(color))
            rects.append(SceneRect(x0: i * width / Self.bars.count, y0: barsTop, x1: (i + 1) * width / Self.bars.count, y1: barsBottom,
                                   color: palette.count - 1))
        }
        // Dark band with a seeded checkerboard of 16-pixel blocks: texture for autofocus, far below the flash level.
        let block = 16
        var greyIndex: [Int: Int] = [:]
        var y = barsBottom
        while y < height {
            var x = 0
            while x < width {
                let luma = 28 + random.next(below: 24)
                // One palette entry per grey level, shared by every block of that level.
                let index = greyIndex[luma] ?? {
                    palette.append(Self.linear(YCbCr(y: UInt8(luma), cb: 128, cr: 128)))
                    greyIndex[luma] = palette.count - 1
                    return palette.count - 1
                }()
                rects.append(SceneRect(x0: x, y0: y, x1: min(x + block, width), y1: min(y + block, height), color: index))
                x += block
            }
            y += block
        }
        texturedBand = PixelRect(x0: width / 4, y0: barsBottom, x1: width, y1: height)
        // The grey card covers the left quarter of the band.
        greyCard = PixelRect(x0: 0, y0: barsBottom, x1: (width / 4) & ~1, y1: height)
        let g = Self.greyCardReflectance
        palette.append(LinearColor(r: g, g: g, b: g))
        rects.append(SceneRect(x0: greyCard.x0, y0: greyCard.y0, x1: greyCard.x1, y1: greyCard.y1, color: palette.count - 1))
        palette.append(Self.linear(Self.boxPalette[boxChoice]))
        boxColorIndex = palette.count - 1
        self.palette = palette
        self.rects = rects
    }

    // MARK: Rendering

    /// Paints frame `index` of a neutral camera into `buffer` (same format and size as the renderer),
    /// with the sync flash placed for constant frame durations.
    public func render(frame index: Int64, into buffer: PixelBuffer) {
        _ = render(frame: index, effects: .neutral, syncFlash: Self.showsSyncFlash(frame: index, frameDuration: frameDuration),
                   metering: nil, into: buffer)
    }

    /// Paints frame `index` as seen through `effects`, measures it for the auto controllers, then
    /// draws the markers.
    /// `motion` (camera shake and stabilization, `CameraShake`) moves the picture after the camera
    /// effects and before the statistics and markers; nil or identity leaves it where it is.
    /// Scene items (`items`: a QR code, a face) are drawn over the scene before the camera's blur
    /// and noise, and under the markers.
    public func render(frame index: Int64, effects: CameraEffects, syncFlash: Bool, metering: MeteringRequest?,
                       motion: FrameMotion? = nil, into buffer: PixelBuffer, items: SceneItemSettings = SceneItemSettings()) -> FrameMeasurements {
        precondition(buffer.format == pixelFormat && buffer.width == width && buffer.height == height,
                     "buffer does not match the renderer's format")
        let span = width - boxSize
        let sceneFrame = motion?.sceneFrame ?? index
        let x = Int((Int64(boxX0) + sceneFrame * Int64(boxSpeed)) % Int64(span)) & ~1
        let box = transform(SceneRect(x0: x, y0: boxY, x1: x + boxSize, y1: boxY + boxSize, color: boxColorIndex), zoom: effects.zoom)
        // Blurred, a frame is its background except in the box's rows (scene items may be anywhere):
        // only those rows are copied and blurred, the others come from the background blurred once
        // (from its second frame on). Bit-identical to blurring the whole frame.
        let reused = effects.blurRadius > 0 && items.isEmpty && reusesBackgroundRowPass
            && CameraImaging.canReuseRowPass(buffer, radius: effects.blurRadius)
        // Noisy and sharp (no blur, no items), the luma the box misses is written once, as
        // background + noise (`CameraImaging.addNoise(from:)`), instead of copied and then noised.
        let boxRect = PixelRect(x0: box.x0, y0: box.y0, x1: box.x1, y1: box.y1)
        let fusesNoise = fusesNoiseWithCopy && effects.noiseSigma >= 0.25 && effects.blurRadius == 0 && items.isEmpty
            && CameraImaging.canNoiseFromSource(buffer)
        // Plain (sharp, noiseless, no items, no shake), a frame is the background, the box and the
        // markers, so memory that last held a plain frame over the same background needs only that
        // frame's box, stamp band and sync marker put back (`drawPlainBackground`). Noisy and sharp,
        // the same holds for its chroma (the noise is luma only), so only the chroma is put back.
        let still = motion?.isIdentity ?? true
        let plain = effects.blurRadius == 0 && effects.noiseSigma < 0.25 && items.isEmpty && still
        let noiseSource = fusesNoise ? copyBackground(effects, into: buffer) : nil
        let plainFrame = plain ? drawPlainBackground(effects, into: buffer) : nil
        let blurredBackground = fusesNoise || plain ? nil
            : drawBackground(effects, into: buffer, onlyRows: reused ? box.y0..<max(box.y0, box.y1) : nil)
        let boxColor = Self.encode(scale(palette[boxColorIndex], effects), fullRange: effects.fullRange)
        fill(buffer, rows: box.y0..<box.y1, columns: box.x0..<box.x1, color: boxColor)
        if !items.isEmpty {
            painter.paint(items, seconds: itemSeconds(frame: index), zoom: effects.zoom, gain: (effects.red, effects.green, effects.blue),
                          fullRange: effects.fullRange, into: buffer)
        }
        if effects.blurRadius > 0 { CameraImaging.blur(buffer, radius: effects.blurRadius, reusing: blurredBackground) }
        if let noiseSource {
            CameraImaging.addNoise(buffer, sigma: effects.noiseSigma, seed: seed, frame: index, from: noiseSource.background, inPlace: boxRect)
        } else if effects.noiseSigma >= 0.25 {
            CameraImaging.addNoise(buffer, sigma: effects.noiseSigma, seed: seed, frame: index)
        }
        if let motion, !motion.isIdentity {
            motionScratch.withLock { scratch in
                if scratch == nil { scratch = PixelBuffer(format: pixelFormat, width: width, height: height) }
                if let scratch { CameraShake.apply(motion, to: buffer, scratch: scratch) }
            }
        }
        var measurements = FrameMeasurements()
        if let metering { measurements = CameraImaging.measure(buffer, metering, fullRange: effects.fullRange) }
        // The markers: neutral stamp band, stamp, flash — after every camera effect.
        fill(buffer, rows: 0..<layout.stampBandHeight, columns: 0..<width,
             color: YCbCr(y: FrameMarkerLayout.lumaZero, cb: FrameMarkerLayout.neutralChroma, cr: FrameMarkerLayout.neutralChroma))
        drawStamp(UInt32(truncatingIfNeeded: index), into: buffer)
        // The sync-marker square is part of the overlay: luma 235 on a flash frame, 16 otherwise, so
        // an overexposed or zoomed scene can never pass for a flash.
        fill(buffer, rows: layout.syncMarkerRows, columns: layout.syncMarkerColumns,
             color: YCbCr(y: syncFlash ? FrameMarkerLayout.lumaOne : FrameMarkerLayout.lumaZero, cb: 128, cr: 128))
        // After the last write (every write call clears it). A shaken frame moved its chroma too.
        if let drawn = plainFrame ?? (still ? noiseSource?.record : nil) {
            drawn.box = boxRect
            drawn.lumaIsBackground = plainFrame != nil
            buffer.producerContent = drawn
        }
        return measurements
    }

    /// Scene item time: frame index × frame duration (items move on the frame grid).
    func itemSeconds(frame index: Int64) -> Double { Double(index) * frameDuration.seconds }

    /// Where the scene items of frame `index` are (what `render` draws with the same arguments).
    public func sceneTruth(frame index: Int64, items: SceneItemSettings, zoom: Double) -> [SceneItemTruth] {
        guard !items.isEmpty else { return [] }
        return painter.truth(items, seconds: itemSeconds(frame: index), frame: Dimensions(width: width, height: height), zoom: zoom,
                             topBand: layout.stampBandHeight)
    }

    /// Frames whose background was put back from what their memory last held, not copied whole.
    package var partialBackgroundCount: Int { partialBackgrounds.load(ordering: .relaxed) }
    let partialBackgrounds = Atomic<Int>(0)

    /// True when frame `index` is the first with PTS ≥ t for some whole second t ≥ 1.
    public static func showsSyncFlash(frame index: Int64, frameDuration: MediaTime) -> Bool {
        guard index >= 1, frameDuration.isNumeric else { return false }
        let ts = Int64(frameDuration.timescale), v = frameDuration.value
        // floor(PTS(n)) > floor(PTS(n-1)), exact in integers.
        return (index * v) / ts > ((index - 1) * v) / ts
    }

    /// True when a frame at `offset` from the stream start is the first at or after a whole second,
    /// given the previous frame's offset (for frame durations that change, e.g. long exposures).
    public static func showsSyncFlash(offset: MediaTime, previous: MediaTime?) -> Bool {
        guard let previous, offset.isNumeric, previous.isNumeric else { return false }
        return offset.value / Int64(offset.timescale) > previous.value / Int64(previous.timescale)
    }
}
