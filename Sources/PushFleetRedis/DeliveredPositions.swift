/// A shard's delivered positions past its cursor, as one field of `pf:{C}:delivered`: ascending
/// decimal numbers joined by commas (`"12,13,15"`), which the claim script counts in a range
/// without a decoder of its own, and an operator reads in `redis-cli`.
public enum DeliveredPositions {
    /// - Parameter positions: Ascending, without repeats, not negative.
    public static func encode(_ positions: [Int]) -> [UInt8] {
        precondition(zip(positions, positions.dropFirst()).allSatisfy { $0 < $1 } && (positions.first ?? 0) >= 0, "delivered positions ascend")
        return Array(positions.map(String.init).joined(separator: ",").utf8)
    }

    /// - Returns: The positions, or nil when `bytes` is not a list ``encode(_:)`` wrote.
    public static func decode(_ bytes: [UInt8]) -> [Int]? {
        guard !bytes.isEmpty else { return [] }
        var positions: [Int] = []
        for field in bytes.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
            guard let position = Int(String(decoding: field, as: UTF8.self)), position >= 0, position > positions.last ?? -1 else { return nil }
            positions.append(position)
        }
        return positions
    }
}
