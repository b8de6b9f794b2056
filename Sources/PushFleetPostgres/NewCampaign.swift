public import Foundation
public import PushFleetCore

/// What `launch` writes to Postgres for a new campaign: its definition and the size of each shard.
public struct NewCampaign: Sendable, Hashable {
    /// Client-chosen, so that re-running a launch with the same id is idempotent.
    public var id: UUID
    /// The app's bundle id (the APNs topic).
    public var topic: String
    /// `production` or `sandbox`.
    public var environment: APNsEnvironment
    /// The notification body, as sent.
    public var payload: [UInt8]
    /// `apns-push-type`, e.g. `alert`.
    public var pushType: String
    /// `apns-priority`: 10 (immediately) or 5 (power-considerate).
    public var priority: Int
    /// `apns-expiration` in seconds since 1970; 0 means "do not store".
    public var expiration: Int
    /// `apns-collapse-id`, if any.
    public var collapseID: String?
    /// Tokens per shard (the last shard may hold fewer).
    public var shardSize: Int
    /// The number of tokens in each shard, one entry per shard; shard ids are the indices, from 0.
    public var shardTokenCounts: [Int]
    /// Eligible tokens after de-duplication; must equal the sum of ``shardTokenCounts``.
    public var totalTokens: Int
    /// Duplicates dropped from the audience.
    public var duplicatesDropped: Int
    /// A campaign, or a notification worked from its topic's lane.
    public var kind: CampaignKind = .campaign
    /// For a notification, whom it was asked for (`user:U`, `group:G`, `tokens`); nil otherwise.
    public var audience: String? = nil
    /// Notifications per second, fleet-wide; nil sends as fast as the fleet can.
    public var rateLimit: Int? = nil
    /// When it starts (`launch --at`); nil starts at once.
    public var startsAt: Date? = nil
    /// The split test it is a variant of (`launch --variant`), and the variant's name; nil otherwise.
    public var split: SplitMembership? = nil
    /// Whether its payload is a template rendered per recipient from values its shards carry
    /// (``PushFleetCore/PayloadTemplate``).
    public var personalized = false

    public init(
        id: UUID, topic: String, environment: APNsEnvironment, payload: [UInt8], pushType: String, priority: Int,
        expiration: Int, collapseID: String? = nil, shardSize: Int, shardTokenCounts: [Int], totalTokens: Int,
        duplicatesDropped: Int = 0
    ) {
        self.id = id
        self.topic = topic
        self.environment = environment
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.shardSize = shardSize
        self.shardTokenCounts = shardTokenCounts
        self.totalTokens = totalTokens
        self.duplicatesDropped = duplicatesDropped
    }
}

/// Which split test a campaign is a variant of, and which variant.
public struct SplitMembership: Sendable, Hashable {
    /// The split test's id: what `launch` printed and `status` takes.
    public var id: UUID
    /// The variant's name (`A` of `--variant A=…`).
    public var variant: String

    public init(id: UUID, variant: String) {
        self.id = id
        self.variant = variant
    }
}
