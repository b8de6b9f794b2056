public import Foundation
public import PushFleetCore

/// A campaign's definition summary and progress as Postgres holds it (at most about one coordinator
/// interval behind the workers).
public struct CampaignRecord: Sendable, Hashable {
    public var id: UUID
    public var topic: String
    public var environment: APNsEnvironment
    public var state: CampaignState
    /// Eligible tokens.
    public var total: Int
    public var shardCount: Int
    /// Tokens APNs accepted.
    public var accepted: Int
    /// Tokens APNs rejected, by reason string.
    public var rejected: [String: Int]
    /// Notifications sent more than once after a crash or a silent drop (not an outcome; a cost).
    public var resent: Int
    /// Requests repeated because APNs asked for it (HTTP/2 429, 500, 503): a cost, never a duplicate.
    public var retried: Int
    /// Tokens never sent because the operator cancelled.
    public var cancelled: Int
    /// Shards whose every token has an outcome.
    public var doneShards: Int
    public var duplicatesDropped: Int
    public var createdAt: Date
    /// Set the first time the campaign enters ``CampaignState/running``.
    public var startedAt: Date?
    /// Set when the campaign enters a final state.
    public var finishedAt: Date?
    /// The last Redis stream id applied to this record; `0-0` before any.
    public var lastEventID: String

    /// Tokens without an outcome yet.
    public var pending: Int { total - accepted - rejected.values.reduce(0, +) - cancelled }
    /// Shards given up on after too many claims (`campaign retry` puts them back).
    public var deadShards: [Int] = []
    /// Why the campaign is `failed` (or paused by PushFleet itself), for people.
    public var stateReason: String? = nil
    /// When a campaign paused because APNs was down is resumed by the coordinator; nil otherwise.
    public var autoResumeAt: Date? = nil
    /// How many times its Redis queue was rebuilt; a fold names the generation it read.
    public var queueGeneration: Int = 0
    /// The number of the last Redis snapshot folded (``ProgressUpdate/foldSequence``).
    public var foldSequence: Int = 0
    /// A campaign, or a notification worked from its topic's lane.
    public var kind: CampaignKind = .campaign
    /// Notifications per second, fleet-wide; nil sends as fast as the fleet can.
    public var rateLimit: Int? = nil
    /// When it starts (`launch --at`); nil when it started at once.
    public var startsAt: Date? = nil
    /// The split test it is a variant of (`launch --variant`); nil otherwise.
    public var splitID: UUID? = nil
    /// Its variant's name in that split test.
    public var variant: String? = nil

    public init(
        id: UUID, topic: String, environment: APNsEnvironment, state: CampaignState, total: Int, shardCount: Int,
        accepted: Int = 0, rejected: [String: Int] = [:], resent: Int = 0, retried: Int = 0, cancelled: Int = 0, doneShards: Int = 0,
        duplicatesDropped: Int = 0, createdAt: Date, startedAt: Date? = nil, finishedAt: Date? = nil,
        lastEventID: String = "0-0"
    ) {
        self.id = id
        self.topic = topic
        self.environment = environment
        self.state = state
        self.total = total
        self.shardCount = shardCount
        self.accepted = accepted
        self.rejected = rejected
        self.resent = resent
        self.retried = retried
        self.cancelled = cancelled
        self.doneShards = doneShards
        self.duplicatesDropped = duplicatesDropped
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.finishedAt = finishedAt
        self.lastEventID = lastEventID
    }
}
