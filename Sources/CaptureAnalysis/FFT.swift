#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A small in-place iterative radix-2 FFT; enough for locating one spectral peak, so no
/// dependency on an external DSP library is needed.
enum FFT {
    /// Transforms `real`/`imag` in place (forward, unnormalised). Both must have the same
    /// power-of-two length.
    static func transform(real: inout [Double], imag: inout [Double]) {
        let n = real.count
        precondition(n == imag.count && n > 0 && n & (n - 1) == 0, "FFT length must be a power of two")
        guard n > 1 else { return }
        // Twiddles e^(−2πik/n) for k < n/2; every stage reads them with a stride.
        let half = n / 2
        var cosTable = [Double](repeating: 0, count: half)
        var sinTable = [Double](repeating: 0, count: half)
        for k in 0 ..< half {
            let angle = -2 * Double.pi * Double(k) / Double(n)
            cosTable[k] = cos(angle)
            sinTable[k] = sin(angle)
        }

        real.withUnsafeMutableBufferPointer { re in
            imag.withUnsafeMutableBufferPointer { im in
                // Bit-reversal permutation.
                var j = 0
                for i in 1 ..< n {
                    var bit = n >> 1
                    while j & bit != 0 {
                        j ^= bit
                        bit >>= 1
                    }
                    j ^= bit
                    if i < j {
                        re.swapAt(i, j)
                        im.swapAt(i, j)
                    }
                }
                // Butterflies, doubling the span each stage.
                var size = 2
                while size <= n {
                    let halfSize = size / 2
                    let step = n / size
                    var start = 0
                    while start < n {
                        for j in 0 ..< halfSize {
                            let wr = cosTable[j * step]
                            let wi = sinTable[j * step]
                            let a = start + j
                            let b = a + halfSize
                            let tr = re[b] * wr - im[b] * wi
                            let ti = re[b] * wi + im[b] * wr
                            re[b] = re[a] - tr
                            im[b] = im[a] - ti
                            re[a] += tr
                            im[a] += ti
                        }
                        start += size
                    }
                    size *= 2
                }
            }
        }
    }
}
