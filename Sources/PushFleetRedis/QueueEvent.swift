/// One entry of `pf:{C}:events`, read by the coordinator with ``CampaignQueue/events(campaign:after:count:)``.
public enum QueueEvent: Hashable, Sendable {
    /// APNs refused a token of `shard` (stream fields `k=rejected s t r ts`).
    case rejected(Rejection, shard: Int)
    /// Every token of `shard` has an outcome, and the shard's list is gone (`k=shard_done s`).
    case shardDone(shard: Int)
}
