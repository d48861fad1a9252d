/// SplitMix64: a tiny, fast generator whose sequence depends only on its seed — the simulator's
/// only source of randomness, so content is identical on every run and machine. (`ck_noise_tile`
/// in imaging.c is the same generator in C, for the noise tile; `NoiseKernelTests` holds them equal.)
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in 0..<bound.
    mutating func next(below bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
