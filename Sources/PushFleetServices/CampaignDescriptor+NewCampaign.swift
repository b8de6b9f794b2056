public import PushFleetPostgres
public import PushFleetRedis

extension CampaignDescriptor {
    /// What workers need of a campaign launch defined, with the status they should see.
    public init(_ campaign: NewCampaign, status: CampaignQueueStatus) {
        self.init(
            id: campaign.id, definition: campaign.definition, shardCount: campaign.shardTokenCounts.count,
            totalTokens: campaign.totalTokens, status: status
        )
    }
}
