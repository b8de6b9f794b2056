public import PushFleetCore

/// What a read of a held shard gives: tokens to send, or, for a throttled campaign whose token
/// bucket is short, none yet and how long to wait (``CampaignQueue/read(_:from:count:clock:)``).
public struct ShardWindow: Sendable, Hashable {
    /// The tokens read, in shard order; empty past the end, or while paced.
    public var tokens: [DeviceToken]
    /// A personalized campaign's: each token's packed values (``PayloadTemplate/pack(_:)``), in
    /// the same order; nil for any other.
    public var values: [[UInt8]]?
    /// Set when the campaign's rate limit holds the read back: read again after this long.
    public var retryAfter: Duration?

    public init(tokens: [DeviceToken], values: [[UInt8]]? = nil, retryAfter: Duration?) {
        self.tokens = tokens
        self.values = values
        self.retryAfter = retryAfter
    }
}

/// A personalized campaign's shard list entry: the token's length (one byte, 1…255), the token,
/// then the recipient's packed values. Any other campaign's entry is the token's bytes alone.
public enum ShardEntry {
    /// The size of `token`'s entry with `valueCount` bytes of values.
    static func byteCount(_ token: DeviceToken, valueCount: Int) -> Int { 1 + token.count + valueCount }

    /// Appends `token`'s entry, with its packed `values`, to `bytes`.
    static func append(_ token: DeviceToken, values: UnsafeRawBufferPointer, to bytes: inout [UInt8]) {
        bytes.append(UInt8(token.count))
        token.appendBytes(to: &bytes)
        bytes.append(contentsOf: values)
    }

    /// The token and values of `entry`, or nil when it is not such an entry.
    public static func decode(_ entry: [UInt8]) -> (token: DeviceToken, values: [UInt8])? {
        guard let length = entry.first.map(Int.init), length > 0, entry.count > length,
            let token = try? DeviceToken(bytes: entry[1...length])
        else { return nil }
        return (token, Array(entry[(1 + length)...]))
    }
}
