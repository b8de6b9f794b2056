import Foundation

/// How every JSON object PushFleet prints or answers is written: by `JSONEncoder`, compact, keys
/// in order (`JSONEncoder` alone writes an object's keys in a different order each run), `/` as
/// it is. A type whose optional fields must read `null` when absent writes them in its own
/// `encode(to:)` (a synthesized one leaves them out).
public enum PushFleetJSON {
    /// `value` as compact JSON text.
    public static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // PushFleet's objects hold strings, integers, booleans, nulls and finite numbers: encoding
        // them cannot fail.
        return String(decoding: try! encoder.encode(value), as: UTF8.self)
    }

    /// `value` rounded to `places` decimals, which JSON writes as just those digits (12.3, not
    /// 12.300000000000001; a whole number without its zeros, 12).
    public static func rounded(_ value: Double, places: Int) -> Double {
        let scale = pow(10, Double(places))
        return (value * scale).rounded() / scale
    }
}
