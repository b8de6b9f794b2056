/// A campaign's running totals, from `pf:{C}:stats`.
public struct CampaignCounters: Hashable, Sendable {
    /// Tokens APNs accepted.
    public var accepted: Int
    /// Tokens APNs rejected, by reason.
    public var rejected: [String: Int]
    /// Tokens sent more than once (a dead worker's unconfirmed window, or re-sends a worker reported).
    public var resent: Int
    /// Requests repeated because APNs asked for it (HTTP/2 429, 500, 503).
    public var retried: Int
    /// Shards completed.
    public var doneShards: Int

    public init(accepted: Int = 0, rejected: [String: Int] = [:], resent: Int = 0, retried: Int = 0, doneShards: Int = 0) {
        self.accepted = accepted
        self.rejected = rejected
        self.resent = resent
        self.retried = retried
        self.doneShards = doneShards
    }

    /// All rejections, over every reason.
    public var rejectedTotal: Int { self.rejected.values.reduce(0, +) }
}
