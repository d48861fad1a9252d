/// A rational point or span of media time, `value / timescale` seconds — CaptureKit's CMTime.
///
/// Arithmetic is exact: operands are brought to a common timescale, and only when that
/// would overflow does the result fall back to the larger timescale with rounding.
public struct MediaTime: Sendable, Hashable {
    /// Which kind of time this is. Only `.numeric` values carry `value`/`timescale`.
    public enum Kind: Sendable, Hashable {
        case numeric, invalid, indefinite, positiveInfinity, negativeInfinity
    }

    public let value: Int64
    public let timescale: Int32
    public let kind: Kind

    /// A time of `value / timescale` seconds. A timescale of 0 or less makes an invalid time, as
    /// `CMTimeMake` does (bad input is a value the API can report, never a trap).
    public init(value: Int64, timescale: Int32) {
        let valid = timescale > 0
        self.value = valid ? value : 0
        self.timescale = valid ? timescale : 1
        self.kind = valid ? .numeric : .invalid
    }

    private init(kind: Kind) {
        self.value = 0
        self.timescale = 1
        self.kind = kind
    }

    /// Seconds rounded to the nearest tick of `preferredTimescale`.
    public init(seconds: Double, preferredTimescale: Int32) {
        if seconds.isNaN { self = .invalid; return }
        if seconds.isInfinite { self = seconds > 0 ? .positiveInfinity : .negativeInfinity; return }
        // Beyond Int64 ticks (≈ 292 years in nanoseconds) the time is out of range, not a trap
        // (found by fuzzing `--control exposure.duration=…`).
        let ticks = (seconds * Double(preferredTimescale)).rounded()
        guard let value = Int64(exactly: ticks) else {
            self = ticks.isNaN ? .invalid : (ticks > 0 ? .positiveInfinity : .negativeInfinity)
            return
        }
        self.init(value: value, timescale: preferredTimescale)
    }

    public static let zero = MediaTime(value: 0, timescale: 1)
    public static let invalid = MediaTime(kind: .invalid)
    public static let indefinite = MediaTime(kind: .indefinite)
    public static let positiveInfinity = MediaTime(kind: .positiveInfinity)
    public static let negativeInfinity = MediaTime(kind: .negativeInfinity)

    public var isValid: Bool { kind != .invalid }
    public var isNumeric: Bool { kind == .numeric }
    public var isIndefinite: Bool { kind == .indefinite }

    /// Seconds as a Double; NaN for invalid and indefinite, ±infinity for the infinities.
    public var seconds: Double {
        switch kind {
        case .numeric: return Double(value) / Double(timescale)
        case .invalid, .indefinite: return .nan
        case .positiveInfinity: return .infinity
        case .negativeInfinity: return -.infinity
        }
    }

    /// The same time expressed in `newTimescale` ticks, rounding half away from zero.
    public func convertScale(_ newTimescale: Int32) -> MediaTime {
        guard isNumeric else { return self }
        if newTimescale == timescale { return self }
        return MediaTime(value: Self.rescale(value, from: timescale, to: newTimescale), timescale: newTimescale)
    }

    /// `value * to / from` rounded to nearest, computed in 128 bits so large values do not overflow.
    static func rescale(_ value: Int64, from: Int32, to: Int32) -> Int64 {
        let product = value.multipliedFullWidth(by: Int64(to))
        let divisor = Int64(from)
        let (q, r) = divisor.dividingFullWidth(product)
        // Round half away from zero.
        if r.magnitude * 2 >= divisor.magnitude {
            return value >= 0 ? q + 1 : q - 1
        }
        return q
    }

    /// A timescale both operands can be expressed in exactly, or the larger one when that overflows.
    static func commonTimescale(_ a: Int32, _ b: Int32) -> Int32 {
        if a == b { return a }
        let g = gcd(Int64(a), Int64(b))
        let lcm = Int64(a) / g * Int64(b)
        return lcm <= Int64(Int32.max) ? Int32(lcm) : max(a, b)
    }

    static func gcd(_ a: Int64, _ b: Int64) -> Int64 {
        var (x, y) = (abs(a), abs(b))
        while y != 0 { (x, y) = (y, x % y) }
        return max(x, 1)
    }
}

extension MediaTime: Comparable {
    private var order: Int {
        switch kind {
        case .negativeInfinity: return 0
        case .numeric: return 1
        case .positiveInfinity: return 2
        case .indefinite: return 3
        case .invalid: return 4
        }
    }

    public static func < (lhs: MediaTime, rhs: MediaTime) -> Bool {
        if lhs.isNumeric && rhs.isNumeric {
            // Cross-multiply in 128 bits: exact for every pair of timescales.
            let l = lhs.value.multipliedFullWidth(by: Int64(rhs.timescale))
            let r = rhs.value.multipliedFullWidth(by: Int64(lhs.timescale))
            return l.high != r.high ? l.high < r.high : l.low < r.low
        }
        return lhs.order < rhs.order
    }

    public static func == (lhs: MediaTime, rhs: MediaTime) -> Bool {
        if lhs.isNumeric && rhs.isNumeric { return !(lhs < rhs) && !(rhs < lhs) }
        return lhs.kind == rhs.kind
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(kind)
        if isNumeric {
            let g = MediaTime.gcd(value, Int64(timescale))
            hasher.combine(value / g)
            hasher.combine(Int64(timescale) / g)
        }
    }
}

extension MediaTime {
    public static func + (lhs: MediaTime, rhs: MediaTime) -> MediaTime {
        guard lhs.isNumeric, rhs.isNumeric else { return nonNumericSum(lhs, rhs, negateRight: false) }
        let ts = commonTimescale(lhs.timescale, rhs.timescale)
        return MediaTime(value: lhs.convertScale(ts).value + rhs.convertScale(ts).value, timescale: ts)
    }

    public static func - (lhs: MediaTime, rhs: MediaTime) -> MediaTime {
        guard lhs.isNumeric, rhs.isNumeric else { return nonNumericSum(lhs, rhs, negateRight: true) }
        let ts = commonTimescale(lhs.timescale, rhs.timescale)
        return MediaTime(value: lhs.convertScale(ts).value - rhs.convertScale(ts).value, timescale: ts)
    }

    public static func * (lhs: MediaTime, rhs: Int64) -> MediaTime {
        guard lhs.isNumeric else { return lhs }
        return MediaTime(value: lhs.value * rhs, timescale: lhs.timescale)
    }

    public static func += (lhs: inout MediaTime, rhs: MediaTime) { lhs = lhs + rhs }
    public static func -= (lhs: inout MediaTime, rhs: MediaTime) { lhs = lhs - rhs }

    private static func nonNumericSum(_ lhs: MediaTime, _ rhs: MediaTime, negateRight: Bool) -> MediaTime {
        if !lhs.isValid || !rhs.isValid { return .invalid }
        if lhs.isIndefinite || rhs.isIndefinite { return .indefinite }
        var r = rhs.kind
        if negateRight {
            if r == .positiveInfinity { r = .negativeInfinity } else if r == .negativeInfinity { r = .positiveInfinity }
        }
        let infinities = [lhs.kind, r].filter { $0 == .positiveInfinity || $0 == .negativeInfinity }
        if Set(infinities).count > 1 { return .invalid }  // +inf + -inf
        return infinities.first == .positiveInfinity ? .positiveInfinity : .negativeInfinity
    }
}

extension MediaTime: CustomStringConvertible {
    public var description: String {
        switch kind {
        case .numeric: return "\(value)/\(timescale)"
        case .invalid: return "invalid"
        case .indefinite: return "indefinite"
        case .positiveInfinity: return "+inf"
        case .negativeInfinity: return "-inf"
        }
    }
}
