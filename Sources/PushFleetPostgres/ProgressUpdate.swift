public import Foundation
public import PushFleetCore

/// One token APNs rejected, as the coordinator read it from a campaign's event stream.
public struct AppliedRejection: Sendable, Hashable {
    public var token: DeviceToken
    /// APNs' reason (`BadDeviceToken`, `Unregistered`, binary `InvalidToken`, …).
    public var reason: RejectionReason
    /// The shard the token belongs to.
    public var shard: Int
    /// When APNs says the token stopped being valid (HTTP/2 410 `timestamp`), in milliseconds since 1970.
    public var apnsTimestampMilliseconds: Int64?

    public init(token: DeviceToken, reason: RejectionReason, shard: Int, apnsTimestampMilliseconds: Int64? = nil) {
        self.token = token
        self.reason = reason
        self.shard = shard
        self.apnsTimestampMilliseconds = apnsTimestampMilliseconds
    }
}

/// What one coordinator round folds into Postgres for one campaign: absolute counters from Redis, and
/// the events read from its stream up to and including ``lastEventID``.
public struct ProgressUpdate: Sendable {
    public var campaign: UUID
    /// Absolute counters: never lower the stored values.
    public var accepted: Int
    public var rejected: [String: Int]
    public var resent: Int
    public var retried: Int
    public var doneShards: Int
    /// Events: applied once, guarded by ``lastEventID``.
    public var rejections: [AppliedRejection]
    public var doneShardIDs: [Int]
    /// The id of the last stream entry these events came from (`ms-seq`); `0-0` or the stored id when none.
    public var lastEventID: String
    /// Shard cursors of the same snapshot as the counters (shard id → first index without an
    /// outcome); only those that changed need be given. Never lower a stored cursor.
    public var cursors: [Int: Int]
    /// Shard `sent` marks of the same snapshot (shard id → the end of what was handed to senders);
    /// only those that changed need be given. Written only with ``foldSequence`` newer than the stored one.
    public var sentMarks: [Int: Int]
    /// Tokens handed to senders past their shard's cursor, in the same snapshot; nil keeps the stored value.
    public var inFlight: Int?
    /// The queue generation the snapshot was read from (``CampaignRecord/queueGeneration``): the
    /// update is refused once the queue has been rebuilt since. Nil applies it regardless.
    public var generation: Int?
    /// The snapshot's number (Redis raises it for each snapshot): `inFlight` is written only from
    /// a snapshot newer than the stored one. Nil leaves both alone.
    public var foldSequence: Int?

    /// Whether the update carries events, not just counters.
    public var hasEvents: Bool { !self.rejections.isEmpty || !self.doneShardIDs.isEmpty }

    public init(
        campaign: UUID, accepted: Int, rejected: [String: Int], resent: Int, retried: Int = 0, doneShards: Int,
        rejections: [AppliedRejection] = [], doneShardIDs: [Int] = [], lastEventID: String, cursors: [Int: Int] = [:],
        sentMarks: [Int: Int] = [:], inFlight: Int? = nil, generation: Int? = nil, foldSequence: Int? = nil
    ) {
        self.campaign = campaign
        self.accepted = accepted
        self.rejected = rejected
        self.resent = resent
        self.retried = retried
        self.doneShards = doneShards
        self.rejections = rejections
        self.doneShardIDs = doneShardIDs
        self.lastEventID = lastEventID
        self.cursors = cursors
        self.sentMarks = sentMarks
        self.inFlight = inFlight
        self.generation = generation
        self.foldSequence = foldSequence
    }
}
