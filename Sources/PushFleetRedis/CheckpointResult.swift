/// The answer to a checkpoint (or heartbeat).
public enum CheckpointResult: Hashable, Sendable {
    /// Recorded, and the lease extended; the campaign's current status tells the worker whether to go on.
    case ok(CampaignQueueStatus)
    /// The shard belongs to someone else now: stop sending it, drop its outstanding work.
    case leaseLost
}
