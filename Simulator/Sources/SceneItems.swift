import CQREncode
import CaptureCore
import Foundation

/// The simulator's scene items: a QR code (rendered with libqrencode) and a face photograph,
/// each placed, sized, rotated and optionally moving. Set by `scene.qrCode…`/`scene.face…`
/// controls (or a profile's scene); off by default, so plain scenes render as before.
public struct SceneItemSettings: Sendable, Hashable {
    /// The QR code's content; empty: no code.
    public var qrCode = ""
    public var qr = Placement(size: 1.0 / 3)
    public var face = false
    public var facePlacement = Placement(size: 0.4)

    /// Where an item is: centre (0…1 of the frame), size (its height as a fraction of the frame
    /// height: the QR symbol without its quiet zone; the face photograph), clockwise rotation in
    /// degrees, and motion: frame widths per second along a horizontal back-and-forth path (the
    /// centre sweeps 0…1 and back, starting at `x` and moving right).
    public struct Placement: Sendable, Hashable {
        public var x = 0.5, y = 0.5
        public var size: Double
        public var rotation = 0.0
        public var motion = 0.0
        public init(size: Double) { self.size = size }

        /// The centre's x at `seconds` into the stream.
        func centreX(at seconds: Double) -> Double {
            guard motion != 0 else { return x }
            let u = (x + motion * seconds).truncatingRemainder(dividingBy: 2)
            let w = u < 0 ? u + 2 : u
            return w <= 1 ? w : 2 - w
        }
    }

    public init() {}

    public var isEmpty: Bool { qrCode.isEmpty && !face }
}

/// What the simulator drew in one frame, where: the ground truth detections are judged by.
public struct SceneTruthFrame: Sendable {
    public var frameIndex: Int64
    public var presentationTime: MediaTime
    public var frameSize: Dimensions
    public var items: [SceneItemTruth]
}

public struct SceneItemTruth: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case qrCode(String)
        case face
    }
    public var kind: Kind
    /// The item's box in the delivered frame (pixels, native orientation, after zoom): the QR
    /// symbol's modules (no quiet zone), or the face region of the photograph
    /// (`SceneItemPainter.faceRegion`). For a rotated item: the box around its rotated corners.
    public var bounds: PixelRectD
    /// The four corners (QR: the symbol's top-left, top-right, bottom-right, bottom-left, as
    /// printed, after rotation).
    public var corners: [PointD]
    /// The whole printed item (with the quiet zone / the whole photograph) is inside the frame and
    /// below the frame-index stamp band.
    public var isFullyVisible: Bool
}

/// A rectangle in (fractional) pixels.
public struct PixelRectD: Sendable, Hashable {
    public var x, y, width, height: Double
    public init(x: Double, y: Double, width: Double, height: Double) { self.x = x; self.y = y; self.width = width; self.height = height }
}

public struct PointD: Sendable, Hashable {
    public var x, y: Double
    public init(x: Double, y: Double) { self.x = x; self.y = y }
}

/// Draws scene items into frames (luma and chroma, through the camera's exposure and white
/// balance; blur and noise come after, in the renderer) and says where they are.
final class SceneItemPainter: Sendable {
    /// The face photograph: RGB, from `SceneAssets/astronaut-face.ppm` (see Fixtures/README.md).
    struct Photo: Sendable {
        var width: Int, height: Int
        var rgb: [UInt8]
    }

    /// libqrencode is called one thread at a time (its Reed-Solomon tables are shared state).
    static let encoderLock = Locked(())
    private let qrCache = Locked<(text: String, modules: [Bool], side: Int)?>(nil)
    private let photo = Locked<Photo?>(nil)

    /// The face region of the photograph (pixels of the 192x208 crop): the box OpenCV's frontal
    /// face cascade puts around the face when the crop is shown upright and sharp — the truth box.
    static let faceRegion = PixelRectD(x: 44, y: 52, width: 108, height: 108)
    /// Quiet zone around a QR symbol, in modules (the standard's four).
    static let quietZone = 4.0
    /// Paper white and ink black, as linear reflectances.
    static let paper = 0.8, ink = 0.02

    /// The QR modules for `text` (row-major, true = dark) and the symbol's side in modules.
    func qrModules(_ text: String) -> (modules: [Bool], side: Int)? {
        qrCache.withLock { cache -> (modules: [Bool], side: Int)? in
            if let c = cache, c.text == text { return (c.modules, c.side) }
            guard let code = SceneItemPainter.encoderLock.withLock({ _ in QRcode_encodeString8bit(text, 0, QR_ECLEVEL_M) }) else { return nil }
            defer { SceneItemPainter.encoderLock.withLock { _ in QRcode_free(code) } }
            let side = Int(code.pointee.width)
            var modules = [Bool](repeating: false, count: side * side)
            for i in 0..<(side * side) { modules[i] = code.pointee.data[i] & 1 == 1 }
            cache = (text, modules, side)
            return (modules, side)
        }
    }

    func facePhoto() -> Photo? {
        photo.withLock { cached -> Photo? in
            if let cached { return cached }
            guard let url = Bundle.module.resourceURL?.appendingPathComponent("SceneAssets/astronaut-face.ppm"),
                  let data = FileManager.default.contents(atPath: url.path), let parsed = Self.parsePPM([UInt8](data)) else { return nil }
            cached = parsed
            return parsed
        }
    }

    /// Binary PPM (P6, maxval 255).
    static func parsePPM(_ bytes: [UInt8]) -> Photo? {
        var fields: [Int] = []
        var i = 2
        guard bytes.count > 2, bytes[0] == UInt8(ascii: "P"), bytes[1] == UInt8(ascii: "6") else { return nil }
        while fields.count < 3 && i < bytes.count {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0a || bytes[i] == 0x0d || bytes[i] == 0x09 { i += 1 }
            var v = 0
            while i < bytes.count, (0x30...0x39).contains(bytes[i]) { v = v * 10 + Int(bytes[i] - 0x30); i += 1 }
            fields.append(v)
        }
        i += 1
        guard fields.count == 3, fields[2] == 255, bytes.count - i >= fields[0] * fields[1] * 3 else { return nil }
        return Photo(width: fields[0], height: fields[1], rgb: Array(bytes[i..<(i + fields[0] * fields[1] * 3)]))
    }

    /// An item's geometry in frame pixels for one frame (after zoom about the frame centre).
    struct Geometry {
        var cx, cy: Double
        /// The side (QR) or height (face) of the item's truth shape, and of what is printed.
        var width, height: Double
        var printedWidth, printedHeight: Double
        var angle: Double

        func rotate(_ u: Double, _ v: Double) -> PointD {
            let c = cos(angle), s = sin(angle)
            return PointD(x: cx + u * c - v * s, y: cy + u * s + v * c)
        }
    }

    func qrGeometry(_ settings: SceneItemSettings, seconds: Double, frame: Dimensions, zoom: Double) -> (Geometry, side: Int)? {
        guard !settings.qrCode.isEmpty, let code = qrModules(settings.qrCode) else { return nil }
        let p = settings.qr
        let symbol = p.size * Double(frame.height) * zoom
        let module = symbol / Double(code.side)
        let printed = symbol + 2 * Self.quietZone * module
        let (cx, cy) = zoomed(p.centreX(at: seconds) * Double(frame.width), p.y * Double(frame.height), frame, zoom)
        return (Geometry(cx: cx, cy: cy, width: symbol, height: symbol, printedWidth: printed, printedHeight: printed,
                         angle: p.rotation * .pi / 180), code.side)
    }

    func faceGeometry(_ settings: SceneItemSettings, seconds: Double, frame: Dimensions, zoom: Double) -> (Geometry, Photo)? {
        guard settings.face, let photo = facePhoto() else { return nil }
        let p = settings.facePlacement
        let height = p.size * Double(frame.height) * zoom
        let width = height * Double(photo.width) / Double(photo.height)
        let (cx, cy) = zoomed(p.centreX(at: seconds) * Double(frame.width), p.y * Double(frame.height), frame, zoom)
        return (Geometry(cx: cx, cy: cy, width: width, height: height, printedWidth: width, printedHeight: height,
                         angle: p.rotation * .pi / 180), photo)
    }

    private func zoomed(_ x: Double, _ y: Double, _ frame: Dimensions, _ zoom: Double) -> (Double, Double) {
        let cx = Double(frame.width) / 2, cy = Double(frame.height) / 2
        return (cx + (x - cx) * zoom, cy + (y - cy) * zoom)
    }

    /// What frame `index` shows (the truth), for these settings.
    func truth(_ settings: SceneItemSettings, seconds: Double, frame: Dimensions, zoom: Double, topBand: Int) -> [SceneItemTruth] {
        var items: [SceneItemTruth] = []
        func visible(_ g: Geometry) -> Bool {
            let corners = [g.rotate(-g.printedWidth / 2, -g.printedHeight / 2), g.rotate(g.printedWidth / 2, -g.printedHeight / 2),
                           g.rotate(g.printedWidth / 2, g.printedHeight / 2), g.rotate(-g.printedWidth / 2, g.printedHeight / 2)]
            return corners.allSatisfy { $0.x >= 0 && $0.x <= Double(frame.width) && $0.y >= Double(topBand) && $0.y <= Double(frame.height) }
        }
        func box(_ corners: [PointD]) -> PixelRectD {
            let xs = corners.map(\.x), ys = corners.map(\.y)
            return PixelRectD(x: xs.min()!, y: ys.min()!, width: xs.max()! - xs.min()!, height: ys.max()! - ys.min()!)
        }
        if let (g, _) = qrGeometry(settings, seconds: seconds, frame: frame, zoom: zoom) {
            let h = g.width / 2
            let corners = [g.rotate(-h, -h), g.rotate(h, -h), g.rotate(h, h), g.rotate(-h, h)]
            items.append(SceneItemTruth(kind: .qrCode(settings.qrCode), bounds: box(corners), corners: corners, isFullyVisible: visible(g)))
        }
        if let (g, photo) = faceGeometry(settings, seconds: seconds, frame: frame, zoom: zoom) {
            let s = g.height / Double(photo.height)
            let r = Self.faceRegion
            let u0 = (r.x - Double(photo.width) / 2) * s, v0 = (r.y - Double(photo.height) / 2) * s
            let u1 = u0 + r.width * s, v1 = v0 + r.height * s
            let corners = [g.rotate(u0, v0), g.rotate(u1, v0), g.rotate(u1, v1), g.rotate(u0, v1)]
            items.append(SceneItemTruth(kind: .face, bounds: box(corners), corners: corners, isFullyVisible: visible(g)))
        }
        return items
    }

    /// Paints the items of `settings` into `buffer` through the camera's colour gains `gain`
    /// (linear multipliers per channel, as `CameraEffects`), video or full range.
    func paint(_ settings: SceneItemSettings, seconds: Double, zoom: Double, gain: (r: Double, g: Double, b: Double),
               fullRange: Bool, into buffer: PixelBuffer) {
        let frame = Dimensions(width: buffer.width, height: buffer.height)
        if let (g, side) = qrGeometry(settings, seconds: seconds, frame: frame, zoom: zoom), let code = qrModules(settings.qrCode) {
            let white = Self.encode(Self.paper * gain.r, Self.paper * gain.g, Self.paper * gain.b, fullRange)
            let black = Self.encode(Self.ink * gain.r, Self.ink * gain.g, Self.ink * gain.b, fullRange)
            let module = g.width / Double(side)
            let half = g.printedWidth / 2
            draw(g, in: buffer) { u, v in
                guard abs(u) <= half, abs(v) <= half else { return nil }
                let col = Int(((u + g.width / 2) / module).rounded(.down)), row = Int(((v + g.width / 2) / module).rounded(.down))
                guard col >= 0, col < side, row >= 0, row < side else { return white }
                return code.modules[row * side + col] ? black : white
            }
        }
        if let (g, photo) = faceGeometry(settings, seconds: seconds, frame: frame, zoom: zoom) {
            // Per-channel tables: photo code value → gamma-encoded value through the gains.
            func table(_ k: Double) -> [Double] {
                (0..<256).map { v in pow(min(pow(Double(v) / 255, 2.2) * k, 1), 1 / 2.2) }
            }
            let tr = table(gain.r), tg = table(gain.g), tb = table(gain.b)
            let scale = Double(photo.height) / g.height
            let hw = g.printedWidth / 2, hh = g.printedHeight / 2
            draw(g, in: buffer) { u, v in
                guard abs(u) <= hw, abs(v) <= hh else { return nil }
                let px = min(Int((u + hw) * scale), photo.width - 1), py = min(Int((v + hh) * scale), photo.height - 1)
                let i = (py * photo.width + px) * 3
                return Self.encodeGamma(tr[Int(photo.rgb[i])], tg[Int(photo.rgb[i + 1])], tb[Int(photo.rgb[i + 2])], fullRange)
            }
        }
    }

    typealias YCbCr = (y: UInt8, cb: UInt8, cr: UInt8)

    static func encode(_ r: Double, _ g: Double, _ b: Double, _ fullRange: Bool) -> YCbCr {
        func e(_ v: Double) -> Double { pow(min(max(v, 0), 1), 1 / 2.2) }
        return encodeGamma(e(r), e(g), e(b), fullRange)
    }

    static func encodeGamma(_ r: Double, _ g: Double, _ b: Double, _ fullRange: Bool) -> YCbCr {
        let y = 0.299 * r + 0.587 * g + 0.114 * b
        let cb = (b - y) / 1.772, cr = (r - y) / 1.402
        func clamp(_ v: Double) -> UInt8 { UInt8(min(max(v.rounded(), 0), 255)) }
        if fullRange { return (clamp(255 * y), clamp(128 + 255 * cb), clamp(128 + 255 * cr)) }
        return (clamp(16 + 219 * y), clamp(128 + 224 * cb), clamp(128 + 224 * cr))
    }

    /// Inverse mapping over the item's rotated bounding box: `sample(u, v)` gets item coordinates
    /// (pixels from the centre, unrotated) of each pixel centre and returns its colour, or nil
    /// outside the item. Chroma is taken from each 2x2 block's top-left pixel.
    private func draw(_ g: Geometry, in buffer: PixelBuffer, sample: (Double, Double) -> YCbCr?) {
        let w = buffer.width, h = buffer.height
        let corners = [g.rotate(-g.printedWidth / 2, -g.printedHeight / 2), g.rotate(g.printedWidth / 2, -g.printedHeight / 2),
                       g.rotate(g.printedWidth / 2, g.printedHeight / 2), g.rotate(-g.printedWidth / 2, g.printedHeight / 2)]
        let x0 = max(0, Int(corners.map(\.x).min()!.rounded(.down))) & ~1, x1 = min(w, Int(corners.map(\.x).max()!.rounded(.up)) + 1)
        let y0 = max(0, Int(corners.map(\.y).min()!.rounded(.down))) & ~1, y1 = min(h, Int(corners.map(\.y).max()!.rounded(.up)) + 1)
        guard x0 < x1, y0 < y1 else { return }
        let c = cos(g.angle), s = sin(g.angle)
        let format = buffer.format
        let luma = buffer.producerBaseAddress(ofPlane: 0).assumingMemoryBound(to: UInt8.self)
        let lumaStride = buffer.bytesPerRow[0]
        for y in y0..<y1 {
            let dy = Double(y) + 0.5 - g.cy
            for x in x0..<x1 {
                let dx = Double(x) + 0.5 - g.cx
                guard let color = sample(dx * c + dy * s, -dx * s + dy * c) else { continue }
                let chroma = x % 2 == 0 && y % 2 == 0
                switch format {
                case .nv12:
                    luma[y * lumaStride + x] = color.y
                    if chroma {
                        let uv = buffer.producerBaseAddress(ofPlane: 1).assumingMemoryBound(to: UInt8.self)
                        let i = (y / 2) * buffer.bytesPerRow[1] + x
                        uv[i] = color.cb
                        uv[i + 1] = color.cr
                    }
                case .yuv420:
                    luma[y * lumaStride + x] = color.y
                    if chroma {
                        buffer.producerBaseAddress(ofPlane: 1).assumingMemoryBound(to: UInt8.self)[(y / 2) * buffer.bytesPerRow[1] + x / 2] = color.cb
                        buffer.producerBaseAddress(ofPlane: 2).assumingMemoryBound(to: UInt8.self)[(y / 2) * buffer.bytesPerRow[2] + x / 2] = color.cr
                    }
                case .yuyv:
                    luma[y * lumaStride + x * 2] = color.y
                    if x % 2 == 0 {
                        luma[y * lumaStride + x * 2 + 1] = color.cb
                        luma[y * lumaStride + x * 2 + 3] = color.cr
                    }
                default:
                    break
                }
            }
        }
    }
}
