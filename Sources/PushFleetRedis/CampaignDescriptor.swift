public import Foundation
public import PushFleetCore

/// What a worker needs to send a campaign, stored in `pf:{C}:meta` by ``CampaignQueue/publish(_:)``.
public struct CampaignDescriptor: Hashable, Sendable {
    /// The campaign's id; its lowercase string is the hash tag of every key of the campaign.
    public var id: UUID
    /// What it sends, and how. Its ``CampaignDefinition/kind`` says which queue its shards wait
    /// in (the campaigns of its topic, or their notification lane); its
    /// ``CampaignDefinition/rateLimit`` paces every worker's reads (``CampaignQueue/read(_:from:count:)``);
    /// for a ``CampaignDefinition/personalized`` one each shard entry carries the recipient's
    /// packed values after its token (``ShardEntry``).
    public var definition: CampaignDefinition
    /// How many shards, numbered `0..<shardCount`.
    public var shardCount: Int
    /// How many tokens, over all shards.
    public var totalTokens: Int
    /// Whether workers may claim its shards.
    public var status: CampaignQueueStatus

    public init(id: UUID, definition: CampaignDefinition, shardCount: Int, totalTokens: Int, status: CampaignQueueStatus = .running) {
        self.id = id
        self.definition = definition
        self.shardCount = shardCount
        self.totalTokens = totalTokens
        self.status = status
    }
}
