public import PushFleetCore

/// What a read of a held shard gives: tokens to send, or, for a throttled campaign whose token
/// bucket is short, none yet and how long to wait (``CampaignQueue/read(_:from:count:clock:)``).
public struct ShardWindow: Sendable, Hashable {
    /// The tokens read, in shard order; empty past the end, or while paced.
    public var tokens: [DeviceToken]
    /// Set when the campaign's rate limit holds the read back: read again after this long.
    public var retryAfter: Duration?

    public init(tokens: [DeviceToken], retryAfter: Duration?) {
        self.tokens = tokens
        self.retryAfter = retryAfter
    }
}
