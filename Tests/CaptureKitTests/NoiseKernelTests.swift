import CCaptureShims
import Testing

/// `ck_add_noise` takes a delta tile split in two byte tiles (up, down) and adds them with byte-wide
/// saturating arithmetic. Its contract is the plain form: every sample becomes v + t clamped to
/// 0…255, whatever t (the simulator's deltas reach beyond ±255 at large sigmas).
struct NoiseKernelTests {
    @Test func saturatingByteTilesAddTheDeltaClampedTo0Through255() {
        var random = SystemRandomNumberGenerator()
        let tileBits = 10, tileMask = (1 << tileBits) - 1
        // Extremes first (0, ±1, ±255, ±256, ±400), then random deltas.
        var deltas = [0, 1, -1, 255, -255, 256, -256, 400, -400]
        while deltas.count <= tileMask { deltas.append(Int.random(in: -400...400, using: &random)) }
        let up = deltas.map { UInt8(min(max($0, 0), 255)) }, down = deltas.map { UInt8(min(max(-$0, 0), 255)) }
        for (width, step) in [(640, 1), (333, 1), (97, 2), (1500, 1)] {
            let height = 7, stride = width * step + 13
            var source = (0..<(stride * height)).map { _ in UInt8.random(in: 0...255, using: &random) }
            for i in 0..<min(64, source.count) { source[i] = [0, 1, 254, 255][i % 4] }
            let start = Int.random(in: 0...tileMask, using: &random), rowJump = Int.random(in: 0...tileMask, using: &random) | 1
            var expected = source
            for y in 0..<height {
                let origin = (start + y * rowJump) & tileMask
                for x in 0..<width {
                    let i = y * stride + x * step
                    expected[i] = UInt8(min(max(Int(source[i]) + deltas[(origin + x) & tileMask], 0), 255))
                }
            }
            // In place (ck_add_noise), and from a separate source row by row range (ck_add_noise_rows).
            var inPlace = source
            inPlace.withUnsafeMutableBufferPointer { b in
                ck_add_noise(b.baseAddress!, stride, Int32(step), Int32(width), Int32(height), up, down,
                             Int32(tileMask), Int32(start), Int32(rowJump))
            }
            let samples = (0..<height).flatMap { y in (0..<width).map { y * stride + $0 * step } }
            let wrongInPlace = samples.first { inPlace[$0] != expected[$0] }
            #expect(wrongInPlace == nil, "in place, width \(width), step \(step): byte \(wrongInPlace ?? -1) is \(wrongInPlace.map { inPlace[$0] } ?? 0), not \(wrongInPlace.map { expected[$0] } ?? 0)")
            #expect(inPlace.indices.allSatisfy { inPlace[$0] == expected[$0] }, "in place, width \(width), step \(step): bytes between samples changed")
            var separate = [UInt8](repeating: 0, count: source.count)
            for rows in [0..<3, 3..<height] {
                separate.withUnsafeMutableBufferPointer { b in
                    ck_add_noise_rows(source, stride, b.baseAddress!, stride, Int32(step), Int32(width), Int32(rows.lowerBound),
                                      Int32(rows.upperBound), up, down, Int32(tileMask), Int32(start), Int32(rowJump))
                }
            }
            let wrongFromSource = samples.first { separate[$0] != expected[$0] }
            #expect(wrongFromSource == nil, "from a source, width \(width), step \(step): byte \(wrongFromSource ?? -1)")
        }
    }

    /// The noise tile is made in C (`ck_noise_tile`): the same bytes as the Swift loop that made it
    /// before — SplitMix64, four uniforms per entry, scaled, rounded half away from zero, clamped.
    @Test func theNoiseTileMadeInCIsTheSwiftLoopsTile() {
        for seed: UInt64 in [0x4E4F_4953_4554_494C, 1, 0xFFFF_FFFF_FFFF_FFFF] {
            var random = SplitMix(seed: seed)  // the suite's SplitMix64 (CrashSafetyTests)
            let swift: [Int8] = (0..<(1 << 16)).map { _ in
                var sum = 0.0
                for _ in 0..<4 { sum += Double(random.next() >> 11) / Double(1 << 53) * 2 - 1 }
                return Int8(max(-127, min(127, (sum * 32 / 1.1547).rounded())))
            }
            var c = [Int8](repeating: 0, count: 1 << 16)
            c.withUnsafeMutableBufferPointer { ck_noise_tile($0.baseAddress, Int32($0.count), seed) }
            let first = c.indices.first { c[$0] != swift[$0] }
            #expect(first == nil, "seed \(seed): entry \(first ?? -1) is \(first.map { c[$0] } ?? 0), not \(first.map { swift[$0] } ?? 0)")
            #expect(Set(swift).count > 100, "the tile spans many values")
        }
    }
}
