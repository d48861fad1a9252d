#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Global motion between consecutive frames by phase correlation on luma: how far the picture as a
/// whole moved (camera shake, or what a stabilizer left of it).
///
/// A window of the frame — a power-of-two rectangle about a quarter of the width and a sixth of the
/// height, centred horizontally and in the bottom third (in the simulator's scene: the textured band,
/// structure in both directions; away from the moving box, the stamp band, the sync marker and the
/// grey card) — is mean-removed, Hann-windowed and transformed; the
/// normalised cross-power spectrum of two frames transforms back to a peak at their shift, refined
/// to sub-pixel by a parabola through the peak and its neighbours. A rotation about the frame's centre
/// shows as the translation it gives the window (mostly horizontal, below the centre).
public struct GlobalMotion: Sendable {
    /// One frame-to-frame shift, in luma pixels (positive: the picture moved right / down).
    public struct Shift: Sendable, Hashable {
        public var dx: Double
        public var dy: Double
        public var magnitude: Double { (dx * dx + dy * dy).squareRoot() }
    }

    public private(set) var shifts: [Shift] = []
    private var previous: (re: [Double], im: [Double], width: Int, height: Int)?

    public init() {}

    /// Adds the next frame; from the second on, appends its shift from the one before.
    public mutating func add(_ plane: LumaPlane) {
        guard let (window, w, h) = Self.window(plane) else { return }
        var re = window, im = [Double](repeating: 0, count: window.count)
        Self.transform2D(re: &re, im: &im, width: w, height: h)
        if let p = previous, p.width == w, p.height == h, let shift = Self.shift(p.re, p.im, re, im, width: w, height: h) {
            shifts.append(shift)
        }
        previous = (re, im, w, h)
    }

    /// Mean shift magnitude over all pairs (0 with fewer than two frames).
    public var meanMagnitude: Double {
        shifts.isEmpty ? 0 : shifts.map(\.magnitude).reduce(0, +) / Double(shifts.count)
    }

    static func powerOfTwo(atMost n: Int) -> Int {
        var p = 1
        while p * 2 <= n { p *= 2 }
        return p
    }

    /// The analysed window: mean-removed and Hann-weighted.
    static func window(_ plane: LumaPlane) -> ([Double], Int, Int)? {
        let w = powerOfTwo(atMost: plane.width / 4), h = powerOfTwo(atMost: plane.height / 6)
        guard w >= 16, h >= 16 else { return nil }
        let x0 = (plane.width - w) / 2
        // Centred in the bottom third: the textured band, below anything that moves by itself.
        let y0 = min(max(0, plane.height * 5 / 6 - h / 2), plane.height - h)
        var values = [Double](repeating: 0, count: w * h)
        var sum = 0.0
        for y in 0..<h {
            let row = (y0 + y) * plane.bytesPerRow + x0
            for x in 0..<w {
                let v = Double(plane.base[row + x])
                values[y * w + x] = v
                sum += v
            }
        }
        let mean = sum / Double(w * h)
        let hannX = (0..<w).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(w)) }
        let hannY = (0..<h).map { 0.5 - 0.5 * cos(2 * Double.pi * Double($0) / Double(h)) }
        for y in 0..<h {
            for x in 0..<w { values[y * w + x] = (values[y * w + x] - mean) * hannX[x] * hannY[y] }
        }
        return (values, w, h)
    }

    /// Forward 2-D FFT in place: every row, then every column.
    static func transform2D(re: inout [Double], im: inout [Double], width w: Int, height h: Int) {
        var rowRe = [Double](repeating: 0, count: w), rowIm = [Double](repeating: 0, count: w)
        for y in 0..<h {
            for x in 0..<w { rowRe[x] = re[y * w + x]; rowIm[x] = im[y * w + x] }
            FFT.transform(real: &rowRe, imag: &rowIm)
            for x in 0..<w { re[y * w + x] = rowRe[x]; im[y * w + x] = rowIm[x] }
        }
        var colRe = [Double](repeating: 0, count: h), colIm = [Double](repeating: 0, count: h)
        for x in 0..<w {
            for y in 0..<h { colRe[y] = re[y * w + x]; colIm[y] = im[y * w + x] }
            FFT.transform(real: &colRe, imag: &colIm)
            for y in 0..<h { re[y * w + x] = colRe[y]; im[y * w + x] = colIm[y] }
        }
    }

    /// The shift from spectrum 1 to spectrum 2: the peak of the inverse transform of
    /// F2·conj(F1)/|F2·conj(F1)|.
    static func shift(_ r1: [Double], _ i1: [Double], _ r2: [Double], _ i2: [Double], width w: Int, height h: Int) -> Shift? {
        var re = [Double](repeating: 0, count: w * h), im = [Double](repeating: 0, count: w * h)
        for k in 0..<(w * h) {
            let a = r2[k] * r1[k] + i2[k] * i1[k]
            let b = i2[k] * r1[k] - r2[k] * i1[k]
            let m = (a * a + b * b).squareRoot()
            if m > 1e-12 {
                // Conjugated, so the forward transform below is the inverse (up to 1/N and a conjugate).
                re[k] = a / m
                im[k] = -b / m
            }
        }
        transform2D(re: &re, im: &im, width: w, height: h)
        var best = 0
        for k in 1..<(w * h) where re[k] > re[best] { best = k }
        guard re[best] > 0 else { return nil }
        let px = best % w, py = best / w
        func at(_ x: Int, _ y: Int) -> Double { re[((y + h) % h) * w + (x + w) % w] }
        func refine(_ minus: Double, _ centre: Double, _ plus: Double) -> Double {
            let d = minus - 2 * centre + plus
            return d < 0 ? 0.5 * (minus - plus) / d : 0
        }
        var dx = Double(px) + refine(at(px - 1, py), at(px, py), at(px + 1, py))
        var dy = Double(py) + refine(at(px, py - 1), at(px, py), at(px, py + 1))
        if dx > Double(w) / 2 { dx -= Double(w) }
        if dy > Double(h) / 2 { dy -= Double(h) }
        return Shift(dx: dx, dy: dy)
    }
}
