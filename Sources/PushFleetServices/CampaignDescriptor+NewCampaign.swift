public import PushFleetPostgres
public import PushFleetRedis

extension CampaignDescriptor {
    /// What workers need of a campaign launch defined, with the status they should see.
    public init(_ campaign: NewCampaign, status: CampaignQueueStatus) {
        self.init(
            id: campaign.id, topic: campaign.topic, environment: campaign.environment, payload: campaign.payload,
            pushType: campaign.pushType, priority: campaign.priority, expiration: campaign.expiration,
            collapseID: campaign.collapseID, shardCount: campaign.shardTokenCounts.count, totalTokens: campaign.totalTokens,
            status: status, kind: campaign.kind, rateLimit: campaign.rateLimit, personalized: campaign.personalized
        )
    }
}
