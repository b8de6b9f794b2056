public import PushFleetCore

/// One entry of `pf:{C}:events`, read by the coordinator with ``CampaignQueue/events(campaign:after:count:)``.
public enum QueueEvent: Hashable, Sendable {
    /// APNs refused these tokens of `shard`, in the order its holder checkpointed them: one entry per
    /// checkpoint (`k=rejections s b`, packed by ``RejectionPack``). An entry written by an earlier
    /// version (`k=rejected s t r ts`, one token) reads as a list of one.
    case rejected([Rejection], shard: Int)
    /// Every token of `shard` has an outcome, and the shard's list is gone (`k=shard_done s`).
    case shardDone(shard: Int)
}
