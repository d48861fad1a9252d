import Foundation

/// JSON numbers as `JSONSerialization` hands them over, read exactly. On Linux every JSON value
/// that is a number or a boolean is an `NSNumber`: booleans are the `__NSCFBoolean` class; most
/// numbers plain `NSNumber`s (integers `q`/`Q`, doubles `d`); and a decimal whose digits a double
/// cannot hold exactly (`0.30000000000000004`, long mantissas) is an `NSDecimalNumber`, whose
/// `doubleValue` is not the nearest double — its text is parsed instead. Profile and scenario files
/// read their numbers through here, so a valid JSON number is never refused as a boolean or as
/// "not whole".
public enum JSONNumber {
    private static let booleanClass: AnyClass = type(of: NSNumber(value: true))

    /// True for JSON `true`/`false` (never for a number, whatever its value).
    public static func isBoolean(_ value: Any?) -> Bool {
        guard let value else { return false }
        if let n = value as? NSNumber { return type(of: n) == booleanClass }
        return value is Bool
    }

    /// A JSON number (not a boolean) as the nearest Double; nil for anything else.
    public static func double(_ value: Any?) -> Double? {
        guard let value, !isBoolean(value), let n = value as? NSNumber else { return nil }
        if n is NSDecimalNumber { return Double(n.description) ?? n.doubleValue }
        return n.doubleValue
    }

    /// A JSON number that is a whole number within Int64, exactly: an integer literal as written
    /// (up to ±9223372036854775807), or a number with a fraction or exponent whose value is whole
    /// and exactly representable (`3.0`, `1e3`). nil for a fraction, a value out of range or a non-number.
    public static func integer(_ value: Any?) -> Int64? {
        guard let value, !isBoolean(value), let n = value as? NSNumber else { return nil }
        switch String(cString: n.objCType) {
        case "q", "l", "i", "s", "c": return n.int64Value
        case "Q", "L", "I", "S", "C": return n.uint64Value <= UInt64(Int64.max) ? Int64(n.uint64Value) : nil
        default:
            guard let d = double(value), d.isFinite, d == d.rounded(), abs(d) <= 9_007_199_254_740_992 else { return nil }
            return Int64(d)
        }
    }

    /// A whole JSON number from 0 to UInt64.max (seeds).
    public static func unsigned(_ value: Any?) -> UInt64? {
        guard let value, !isBoolean(value), let n = value as? NSNumber else { return nil }
        if String(cString: n.objCType) == "Q" { return n.uint64Value }
        return integer(value).flatMap { $0 >= 0 ? UInt64($0) : nil }
    }
}
