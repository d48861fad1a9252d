import CaptureCore
import Foundation
import Synchronization

extension SyntheticFrameRenderer {
    func scale(_ c: LinearColor, _ e: CameraEffects) -> LinearColor {
        LinearColor(r: c.r * e.red, g: c.g * e.green, b: c.b * e.blue)
    }

    func transform(_ r: SceneRect, zoom: Double) -> SceneRect {
        guard zoom != 1 else { return r }
        let cx = Double(width) / 2, cy = Double(height) / 2
        func tx(_ v: Int) -> Int { min(max(Int((cx + (Double(v) - cx) * zoom).rounded()), 0), width) }
        func ty(_ v: Int) -> Int { min(max(Int((cy + (Double(v) - cy) * zoom).rounded()), 0), height) }
        return SceneRect(x0: tx(r.x0), y0: ty(r.y0), x1: tx(r.x1), y1: ty(r.y1), color: r.color)
    }

    /// Copies the cached background for these effects, or draws (and caches) it. With `onlyRows`
    /// (luma rows), from the background's second use on, planes the blur will rewrite get only
    /// those rows, and the background blurred ahead is returned for the blur to take the others from.
    func drawBackground(_ effects: CameraEffects, into buffer: PixelBuffer,
                                onlyRows: Range<Int>? = nil) -> (blurred: CameraImaging.BlurredBackground, drawnRows: Range<Int>)? {
        cache.withLock { cached -> (blurred: CameraImaging.BlurredBackground, drawnRows: Range<Int>)? in
            let background = cachedBackground(effects, &cached)
            let template = background.buffer
            background.uses.add(1, ordering: .relaxed)
            guard let onlyRows, background.blurred.withLock({ $0 != nil }) || background.uses.load(ordering: .relaxed) > 1 else {
                CameraImaging.copyPlanes(of: template, into: buffer)
                return nil
            }
            let plan = CameraImaging.blurPlan(buffer, radius: effects.blurRadius)
            CameraImaging.copyRows(of: template, into: buffer) { plane in
                plan.first { $0.index == plane }?.rows(ofLumaRows: onlyRows) ?? 0..<buffer.planeRows[plane]
            }
            let blurred = background.blurred.withLock { cached in
                let blurred = cached ?? CameraImaging.BlurredBackground(template, radius: effects.blurRadius)
                cached = blurred
                return blurred
            }
            return (blurred, onlyRows)
        }
    }

    /// What a plain or noisy frame drew over its background (kept with the buffer's memory,
    /// `PixelBuffer.producerContent`; one per buffer's memory, updated in place while the background
    /// stays the same).
    final class PlainFrame {
        /// Weak: a buffer in a pool must not keep a background the cache has dropped alive.
        weak var background: BackgroundCache?
        var box = PixelRect(x0: 0, y0: 0, x1: 0, y1: 0)
        /// False after a noisy frame: its chroma is the background's outside the box and markers, its luma is not.
        var lumaIsBackground = true
        init(background: BackgroundCache) { self.background = background }
    }

    /// The rectangles the markers cover (luma coordinates): the stamp band and the sync marker.
    private var markerRects: (PixelRect, PixelRect) {
        (PixelRect(x0: 0, y0: 0, x1: width, y1: layout.stampBandHeight),
         PixelRect(x0: layout.syncMarkerColumns.lowerBound, y0: layout.syncMarkerRows.lowerBound,
                   x1: layout.syncMarkerColumns.upperBound, y1: layout.syncMarkerRows.upperBound))
    }

    /// A plain frame's background: when `buffer`'s memory last held a plain frame over this same
    /// background (a pool hands its buffers round, so it usually did), only that frame's box and
    /// markers are copied back from the background — about 6 % of the pixels at 1080p instead of a
    /// whole frame of memory traffic beside the encoder; otherwise the whole background is copied.
    /// Returns the record to store with the buffer once the frame is drawn (the previous one, reused).
    func drawPlainBackground(_ effects: CameraEffects, into buffer: PixelBuffer) -> PlainFrame {
        let previous = buffer.producerContent as? PlainFrame
        let previousBox = previous?.box
        let (background, partial) = cache.withLock { cached -> (BackgroundCache, Bool) in
            let background = cachedBackground(effects, &cached)
            background.uses.add(1, ordering: .relaxed)
            if redrawsOnlyChanges, let previousBox, previous?.background === background, previous?.lumaIsBackground == true {
                let (band, sync) = markerRects
                for rect in [previousBox, band, sync] { CameraImaging.copyRect(rect, of: background.buffer, into: buffer) }
                return (background, true)
            }
            CameraImaging.copyPlanes(of: background.buffer, into: buffer)
            return (background, false)
        }
        guard partial, let previous else { return PlainFrame(background: background) }
        partialBackgrounds.add(1, ordering: .relaxed)
        return previous
    }

    /// The background for `effects` from the cache, drawn (and cached) when the effects changed.
    private func cachedBackground(_ effects: CameraEffects, _ cached: inout BackgroundCache?) -> BackgroundCache {
        if let cached, cached.key == effects { return cached }
        let background = PixelBuffer(format: pixelFormat, width: width, height: height)
        let colors = palette.map { Self.encode(scale($0, effects), fullRange: effects.fullRange) }
        fill(background, rows: 0..<height, columns: 0..<width, color: colors[0])
        for rect in rects {
            let r = transform(rect, zoom: effects.zoom)
            fill(background, rows: r.y0..<r.y1, columns: r.x0..<r.x1, color: colors[rect.color])
        }
        let made = BackgroundCache(key: effects, buffer: background)
        cached = made
        return made
    }

    /// Copies the cached background's chroma planes (its luma the noise pass reads, `addNoise(from:)`);
    /// returns the background and the record to store with the buffer once the frame is drawn. When
    /// the buffer's memory last held a plain or noisy frame over this background, only that frame's
    /// box and markers are put back. The background is never written once cached, so it is read
    /// outside the lock.
    func copyBackground(_ effects: CameraEffects, into buffer: PixelBuffer) -> (background: PixelBuffer, record: PlainFrame) {
        let previous = buffer.producerContent as? PlainFrame
        let previousBox = previous?.box
        let (background, partial) = cache.withLock { cached -> (BackgroundCache, Bool) in
            let background = cachedBackground(effects, &cached)
            background.uses.add(1, ordering: .relaxed)
            let template = background.buffer
            let partial = redrawsOnlyChanges && previousBox != nil && previous?.background === background
            if partial, let previousBox {
                let (band, sync) = markerRects
                for rect in [previousBox, band, sync] { CameraImaging.copyRect(rect, of: template, into: buffer, luma: false) }
            } else {
                CameraImaging.copyRows(of: template, into: buffer) { plane in plane == 0 ? 0..<0 : 0..<buffer.planeRows[plane] }
            }
            return (background, partial)
        }
        guard partial, let previous else { return (background.buffer, PlainFrame(background: background)) }
        partialBackgrounds.add(1, ordering: .relaxed)
        return (background.buffer, previous)
    }
}
