public import Foundation

/// Where a campaign is in its life. Stored as its raw value in `campaigns.state`.
public enum CampaignState: String, Sendable, CaseIterable {
    /// Created by `launch`; not yet published to the workers.
    case pending
    /// Published, and waiting for its start time (`launch --at`); the coordinator starts it.
    case scheduled
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

    /// The state a campaign takes once published: ``scheduled`` while `startsAt` is in the
    /// future, ``running`` otherwise.
    public static func published(startingAt startsAt: Date?, now: Date) -> CampaignState {
        if let startsAt, startsAt > now { .scheduled } else { .running }
    }
}
