public import Foundation
public import PushFleetCore

/// What `launch` writes to Postgres for a new campaign: its definition and the size of each shard.
public struct NewCampaign: Sendable, Hashable {
    /// Client-chosen, so that re-running a launch with the same id is idempotent.
    public var id: UUID
    /// What it sends, and how.
    public var definition: CampaignDefinition
    /// Tokens per shard (the last shard may hold fewer).
    public var shardSize: Int
    /// The number of tokens in each shard, one entry per shard; shard ids are the indices, from 0.
    public var shardTokenCounts: [Int]
    /// Eligible tokens after de-duplication; must equal the sum of ``shardTokenCounts``.
    public var totalTokens: Int
    /// Duplicates dropped from the audience.
    public var duplicatesDropped: Int
    /// For a notification, whom it was asked for (`user:U`, `group:G`, `tokens`); nil otherwise.
    public var audience: String? = nil
    /// When it starts (`launch --at`); nil starts at once.
    public var startsAt: Date? = nil
    /// The split test it is a variant of (`launch --variant`), and the variant's name; nil otherwise.
    public var split: SplitMembership? = nil

    public init(id: UUID, definition: CampaignDefinition, shardSize: Int, shardTokenCounts: [Int], totalTokens: Int, duplicatesDropped: Int = 0) {
        self.id = id
        self.definition = definition
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
