public import Foundation

/// One worker's claim on one shard, proven by its fencing number.
///
/// Every fenced call (``CampaignQueue/read(_:from:count:)``,
/// ``CampaignQueue/checkpoint(_:cursor:accepted:rejections:resent:leaseMilliseconds:)``,
/// ``CampaignQueue/complete(_:)``, ``CampaignQueue/release(_:cursor:countAttempt:)``) first checks that
/// the shard's owner is still ``owner``; once the lease was reaped and claimed again, it is not.
public struct ShardLease: Hashable, Sendable {
    /// The campaign the shard belongs to.
    public var campaign: UUID
    /// The shard id, `0..<shardCount`.
    public var shard: Int
    /// `"worker|fence"`, as stored in `pf:{C}:owner`.
    public var owner: String
    /// The fencing number: larger for every claim of the campaign.
    public var fence: Int
    /// The first index without an outcome; sending resumes here.
    public var cursor: Int
    /// How many earlier holders lost the shard (expired leases, releases that counted an attempt).
    public var attempts: Int
    /// How many tokens the shard holds (indexes `0..<tokenCount`).
    public var tokenCount: Int
    /// Positions past ``cursor``, ascending, that an earlier holder had delivered (APNs accepted
    /// them) when it gave the shard back: the holder counts them as accepted once its mark passes
    /// them, and does not send them again.
    public var delivered: [Int]

    public init(
        campaign: UUID, shard: Int, owner: String, fence: Int, cursor: Int, attempts: Int, tokenCount: Int, delivered: [Int] = []
    ) {
        self.campaign = campaign
        self.shard = shard
        self.owner = owner
        self.fence = fence
        self.cursor = cursor
        self.attempts = attempts
        self.tokenCount = tokenCount
        self.delivered = delivered
    }
}
