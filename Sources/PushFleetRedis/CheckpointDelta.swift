public import PushFleetCore

/// What a shard's holder reports in one checkpoint: outcomes since its previous checkpoint.
public struct CheckpointDelta: Hashable, Sendable {
    /// Numbers the holder's checkpoints, from 1. A checkpoint repeated after an unanswered call keeps
    /// its number and is applied once.
    public var sequence: Int
    /// The first index without an outcome. Never lowers the stored cursor.
    public var cursor: Int
    /// Tokens accepted.
    public var accepted: Int
    /// Tokens rejected; each becomes an event and bumps `rejected:<reason>`.
    public var rejections: [Rejection]
    /// Tokens sent again that may have been delivered already.
    public var resent: Int
    /// Requests repeated after an answer that asked for it (HTTP/2 429, 500, 503), not deliveries.
    public var retried: Int

    public init(sequence: Int, cursor: Int, accepted: Int = 0, rejections: [Rejection] = [], resent: Int = 0, retried: Int = 0) {
        self.sequence = sequence
        self.cursor = cursor
        self.accepted = accepted
        self.rejections = rejections
        self.resent = resent
        self.retried = retried
    }
}
