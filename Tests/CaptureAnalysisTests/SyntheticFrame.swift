import CaptureAnalysis
import CaptureCore

/// A deterministic pseudo-random generator (SplitMix64), so damaged frames are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A luma plane painted per the marker contract, then damaged roughly as a codec would.
struct SyntheticFrame {
    let width: Int
    let height: Int
    let bytesPerRow: Int
    var pixels: [UInt8]

    /// Background bars, a dark box under the sync marker, the stamp band for `index` (none when
    /// nil) and the flash when `flash` is set. `damage` adds ±20 noise and a 1-pixel horizontal
    /// box blur.
    init(width: Int, height: Int, index: UInt32?, flash: Bool = false, padding: Int = 0,
         damage: Bool = true, seed: UInt64 = 1) {
        self.width = width
        self.height = height
        bytesPerRow = width + padding
        let bars: [UInt8] = [180, 160, 140, 120, 100, 80, 60, 128]
        var row = [UInt8](repeating: 0, count: bytesPerRow)
        for x in 0 ..< width { row[x] = bars[x * bars.count / width] }
        var pixels: [UInt8] = []
        pixels.reserveCapacity(bytesPerRow * height)
        for _ in 0 ..< height { pixels.append(contentsOf: row) }

        let layout = FrameMarkerLayout(width: width, height: height)
        // Dark surround where the flash appears (the contract's ≈ 40 background).
        fill(&pixels, bytesPerRow, columns: (width - width / 4) ..< width,
             rows: (height - height / 4) ..< height, luma: 40)
        if flash {
            fill(&pixels, bytesPerRow, columns: layout.syncMarkerColumns, rows: layout.syncMarkerRows,
                 luma: FrameMarkerLayout.lumaOne)
        }
        if let index {
            for k in 0 ..< FrameMarkerLayout.bitCount {
                let bit = (index >> UInt32(FrameMarkerLayout.bitCount - 1 - k)) & 1
                fill(&pixels, bytesPerRow, columns: layout.stampCellColumns(k), rows: 0 ..< layout.stampBandHeight,
                     luma: bit == 1 ? FrameMarkerLayout.lumaOne : FrameMarkerLayout.lumaZero)
            }
        }
        self.pixels = pixels
        if damage { self.damage(seed: seed) }
    }

    /// Adds uniform noise in −20...20 and then averages every pixel with its left and right
    /// neighbours — the blur and grain of H.264 at a modest bitrate.
    mutating func damage(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let width = self.width, height = self.height, stride = bytesPerRow
        pixels.withUnsafeMutableBufferPointer { buffer in
            for y in 0 ..< height {
                let start = y * stride
                for x in 0 ..< width {
                    let noise = Int(rng.next() % 41) - 20
                    buffer[start + x] = UInt8(clamping: Int(buffer[start + x]) + noise)
                }
                var left = Int(buffer[start])
                for x in 0 ..< width {
                    let centre = Int(buffer[start + x])
                    let right = Int(buffer[start + min(x + 1, width - 1)])
                    buffer[start + x] = UInt8((left + centre + right + 1) / 3)
                    left = centre
                }
            }
        }
    }

    /// Overwrites a rectangle with one luma value (before damage).
    mutating func paint(columns: Range<Int>, rows: Range<Int>, luma: UInt8) {
        fill(&pixels, bytesPerRow, columns: columns, rows: rows, luma: luma)
    }

    /// Runs `body` with a `LumaPlane` over these pixels.
    func withPlane<R>(_ body: (LumaPlane) throws -> R) rethrows -> R {
        try pixels.withUnsafeBytes {
            try body(LumaPlane(base: $0, width: width, height: height, bytesPerRow: bytesPerRow))
        }
    }
}

private func fill(_ pixels: inout [UInt8], _ bytesPerRow: Int, columns: Range<Int>, rows: Range<Int>, luma: UInt8) {
    for y in rows {
        let start = y * bytesPerRow
        for x in columns { pixels[start + x] = luma }
    }
}
