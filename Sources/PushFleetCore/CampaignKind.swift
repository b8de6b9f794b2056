/// What a campaign is for, and so which queue its shards wait in.
///
/// A ``campaign`` is a marketing send to an audience of any size: workers claim its shards when
/// nothing more urgent waits. A ``notification`` is a doorbell ring: a handful of devices that must
/// hear now, whatever campaigns are running. It is worked exactly as a campaign is (leases, fenced
/// checkpoints, the coordinator's accounting), but from a lane of its own that every worker serves
/// first, over a connection kept open for it.
public enum CampaignKind: String, Sendable, Hashable, CaseIterable {
    case campaign
    case notification
}
