import CZBar
import CaptureCore

/// The code symbologies ZBar decodes (ZBar 0.23: no Data Matrix; its PDF417 decoder is
/// unfinished and disabled in Debian's build, so it is not offered).
public enum CodeSymbology: String, Sendable, Hashable, CaseIterable {
    case qr, ean13, ean8, upce, upca, code39, code93, code128, interleaved2of5, codabar, dataBar

    var zbarType: zbar_symbol_type_t {
        switch self {
        case .qr: return ZBAR_QRCODE
        case .ean13: return ZBAR_EAN13
        case .ean8: return ZBAR_EAN8
        case .upce: return ZBAR_UPCE
        case .upca: return ZBAR_UPCA
        case .code39: return ZBAR_CODE39
        case .code93: return ZBAR_CODE93
        case .code128: return ZBAR_CODE128
        case .interleaved2of5: return ZBAR_I25
        case .codabar: return ZBAR_CODABAR
        case .dataBar: return ZBAR_DATABAR
        }
    }

    init?(zbar type: zbar_symbol_type_t) {
        guard let match = Self.allCases.first(where: { $0.zbarType == type }) else { return nil }
        self = match
    }
}

/// One decoded code, in the pixel coordinates of the frame the luma came from.
public struct DetectedCode: Sendable, Hashable {
    public var symbology: CodeSymbology
    public var value: String
    /// ZBar's location polygon (QR: the four corners; linear codes: points along the scan lines).
    public var points: [PixelPoint]
    /// The polygon's bounding box.
    public var bounds: PixelBox
}

public struct PixelPoint: Sendable, Hashable {
    public var x, y: Double
    public init(x: Double, y: Double) { self.x = x; self.y = y }
}

/// A box in pixels (doubles: detector coordinates, before normalising).
public struct PixelBox: Sendable, Hashable {
    public var x, y, width, height: Double
    public init(x: Double, y: Double, width: Double, height: Double) { self.x = x; self.y = y; self.width = width; self.height = height }

    /// Intersection over union.
    public func iou(_ other: PixelBox) -> Double {
        let ix = max(0, min(x + width, other.x + other.width) - max(x, other.x))
        let iy = max(0, min(y + height, other.y + other.height) - max(y, other.y))
        let inter = ix * iy
        let union = width * height + other.width * other.height - inter
        return union > 0 ? inter / union : 0
    }
}

/// ZBar's image scanner, thinly wrapped: one instance per detection thread (not thread-safe).
public final class CodeScanner {
    private let scanner: OpaquePointer
    public let symbologies: Set<CodeSymbology>

    public init(symbologies: Set<CodeSymbology>) throws(CaptureError) {
        guard let scanner = DetectorLibraries.lock.withLock({ _ in zbar_image_scanner_create() }) else {
            throw .detectorUnavailable(detector: "ZBar", reason: "zbar_image_scanner_create failed")
        }
        self.scanner = scanner
        self.symbologies = symbologies
        // Everything off, then the requested symbologies on.
        zbar_image_scanner_set_config(scanner, ZBAR_NONE, ZBAR_CFG_ENABLE, 0)
        for s in symbologies { zbar_image_scanner_set_config(scanner, s.zbarType, ZBAR_CFG_ENABLE, 1) }
        // Location polygons for the boxes.
        zbar_image_scanner_set_config(scanner, ZBAR_NONE, ZBAR_CFG_POSITION, 1)
    }

    deinit {
        let scanner = self.scanner
        DetectorLibraries.lock.withLock { _ in zbar_image_scanner_destroy(scanner) }
    }

    /// Decodes every enabled code in `image`; points are in the full frame's pixels.
    public func scan(_ image: LumaImage) -> [DetectedCode] {
        DetectorLibraries.lock.withLock { _ in scanLocked(image) }
    }

    private func scanLocked(_ image: LumaImage) -> [DetectedCode] {
        guard !symbologies.isEmpty, image.width > 0, image.height > 0, let zimage = zbar_image_create() else { return [] }
        defer { zbar_image_destroy(zimage) }
        // 'Y800': 8-bit grey (zbar_fourcc is a macro).
        let y800 = UInt(UInt8(ascii: "Y")) | UInt(UInt8(ascii: "8")) << 8 | UInt(UInt8(ascii: "0")) << 16 | UInt(UInt8(ascii: "0")) << 24
        zbar_image_set_format(zimage, y800)
        zbar_image_set_size(zimage, UInt32(image.width), UInt32(image.height))
        return image.pixels.withUnsafeBufferPointer { pixels -> [DetectedCode] in
            // No cleanup handler: ZBar reads the array only inside zbar_scan_image.
            zbar_image_set_data(zimage, pixels.baseAddress, UInt(pixels.count), nil)
            guard zbar_scan_image(scanner, zimage) > 0 else { return [] }
            var codes: [DetectedCode] = []
            var symbol = zbar_image_first_symbol(zimage)
            while let s = symbol {
                defer { symbol = zbar_symbol_next(s) }
                guard let symbology = CodeSymbology(zbar: zbar_symbol_get_type(s)), let data = zbar_symbol_get_data(s) else { continue }
                let length = Int(zbar_symbol_get_data_length(s))
                let bytes = UnsafeRawBufferPointer(start: data, count: length)
                let value = String(decoding: bytes, as: UTF8.self)
                var points: [PixelPoint] = []
                for i in 0..<zbar_symbol_get_loc_size(s) {
                    points.append(PixelPoint(x: Double(zbar_symbol_get_loc_x(s, i) + Int32(image.origin.x)),
                                             y: Double(zbar_symbol_get_loc_y(s, i) + Int32(image.origin.y))))
                }
                guard !points.isEmpty else { continue }
                let xs = points.map(\.x), ys = points.map(\.y)
                // Location points are pixel centres: the box spans to the far edge of the last pixel.
                let box = PixelBox(x: xs.min()!, y: ys.min()!, width: xs.max()! - xs.min()! + 1, height: ys.max()! - ys.min()! + 1)
                codes.append(DetectedCode(symbology: symbology, value: value, points: points, bounds: box))
            }
            return codes
        }
    }
}
