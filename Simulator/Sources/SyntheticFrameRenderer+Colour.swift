import CaptureCore
import Foundation
import Synchronization

extension SyntheticFrameRenderer {
    // MARK: Colour

    static func linear(_ c: YCbCr) -> LinearColor {
        let y = (Double(c.y) - 16) / 219, cb = (Double(c.cb) - 128) / 224, cr = (Double(c.cr) - 128) / 224
        func lin(_ v: Double) -> Double { pow(min(max(v, 0), 1), gamma) }
        return LinearColor(r: lin(y + 1.402 * cr), g: lin(y - 0.344_136 * cb - 0.714_136 * cr), b: lin(y + 1.772 * cb))
    }

    static func encode(_ c: LinearColor, fullRange: Bool) -> YCbCr {
        func g(_ v: Double) -> Double { pow(min(max(v, 0), 1), 1 / gamma) }
        let r = g(c.r), gg = g(c.g), b = g(c.b)
        let y = 0.299 * r + 0.587 * gg + 0.114 * b
        let cb = (b - y) / 1.772, cr = (r - y) / 1.402
        func clamp(_ v: Double) -> UInt8 { UInt8(min(max(v.rounded(), 0), 255)) }
        if fullRange { return YCbCr(y: clamp(255 * y), cb: clamp(128 + 255 * cb), cr: clamp(128 + 255 * cr)) }
        return YCbCr(y: clamp(16 + 219 * y), cb: clamp(128 + 224 * cb), cr: clamp(128 + 224 * cr))
    }

    /// Linear light of a video-range luma code value (the inverse of the renderer's transfer).
    public static func linearLight(ofLuma code: Double) -> Double {
        pow(min(max((code - 16) / 219, 0), 1), gamma)
    }

    /// `v^gamma` for v in 0…1 in steps of 1/4096 (statistics use it instead of `pow`).
    package static let linearTable: [Double] = (0...4096).map { pow(Double($0) / 4096, gamma) }

    /// Linear R, G, B of a video-range Y'CbCr sample (table-based; for statistics).
    static func linearRGB(y: Double, cb: Double, cr: Double) -> (Double, Double, Double) {
        linearTable.withUnsafeBufferPointer { linearRGB(y: y, cb: cb, cr: cr, table: $0) }
    }

    /// `linearRGB` with the table at hand (the statistics loop's form: no per-sample global access).
    @inline(__always)
    static func linearRGB(y: Double, cb: Double, cr: Double, table: UnsafeBufferPointer<Double>) -> (Double, Double, Double) {
        let yp = (y - 16) / 219, cbp = (cb - 128) / 224, crp = (cr - 128) / 224
        // Nearest table entry; v ≥ 0, so truncating v + 0.5 rounds (and avoids a libm call per sample).
        func lin(_ v: Double) -> Double { table[Int(min(max(v, 0), 1) * 4096 + 0.5)] }
        return (lin(yp + 1.402 * crp), lin(yp - 0.344_136 * cbp - 0.714_136 * crp), lin(yp + 1.772 * cbp))
    }
}
