/// Where a campaign is in its life. Stored as its raw value in `campaigns.state`.
public enum CampaignState: String, Sendable, CaseIterable {
    /// Created by `launch`; not yet published to the workers.
    case pending
    /// Workers may claim its shards.
    case running
    /// Held by the operator; workers claim no new shards.
    case paused
    /// Every token has its terminal outcome.
    case completed
    /// Stopped by the operator; unsent tokens count as cancelled.
    case cancelled
    /// Given up on (for example, its Redis half could not be rebuilt).
    case failed

    /// Whether the campaign has ended: ``completed``, ``cancelled`` or ``failed``. Entering one of these
    /// sets `finished_at`.
    public var isFinal: Bool { self == .completed || self == .cancelled || self == .failed }
}
