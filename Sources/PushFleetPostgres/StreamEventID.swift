/// A Redis stream entry id (`milliseconds-sequence`), ordered as Redis orders them: numerically by
/// milliseconds, then by sequence. `0-0` is the lowest; an empty string reads as `0-0`, and a bare
/// `milliseconds` as `milliseconds-0`.
struct StreamEventID: Comparable, Hashable, Sendable, CustomStringConvertible {
    static let zero = StreamEventID(milliseconds: 0, sequence: 0)

    /// Stored as `bigint`: Redis allows up to 2^64-1, but ids past 2^63-1 (year 292 million) are rejected.
    var milliseconds: Int64
    var sequence: Int64

    init(milliseconds: Int64, sequence: Int64) {
        self.milliseconds = milliseconds
        self.sequence = sequence
    }

    /// - Throws: ``PostgresStoreError`` with code `invalidEventID`.
    init(parsing text: String) throws {
        if text.isEmpty {
            self = .zero
            return
        }
        let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard let ms = Self.number(parts[0]), let seq = parts.count == 2 ? Self.number(parts[1]) : 0 else {
            throw PostgresStoreError.invalidEventID(text)
        }
        self.init(milliseconds: ms, sequence: seq)
    }

    private static func number(_ digits: Substring) -> Int64? {
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(digits)
    }

    var description: String { "\(self.milliseconds)-\(self.sequence)" }

    static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.milliseconds, lhs.sequence) < (rhs.milliseconds, rhs.sequence)
    }
}
