/// What workers may do with a campaign, stored as the `status` field of `pf:{C}:meta`.
public enum CampaignQueueStatus: String, Hashable, Sendable, CaseIterable {
    /// Workers claim its shards and send.
    case running
    /// No new claims; holders learn it at their next checkpoint and release their shards.
    case paused
    /// No new claims; holders learn it at their next checkpoint and stop.
    case cancelled
    /// No claims yet: the campaign waits for its start time (the coordinator sets it running).
    case scheduled
}
