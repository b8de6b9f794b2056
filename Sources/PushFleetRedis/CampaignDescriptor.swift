public import Foundation
public import PushFleetCore

/// What a worker needs to send a campaign, stored in `pf:{C}:meta` by ``CampaignQueue/publish(_:)``.
public struct CampaignDescriptor: Hashable, Sendable {
    /// The campaign's id; its lowercase string is the hash tag of every key of the campaign.
    public var id: UUID
    /// The app's bundle id (`apns-topic`).
    public var topic: String
    /// `"production"` or `"sandbox"`.
    public var environment: APNsEnvironment
    /// The notification payload, as sent (JSON bytes).
    public var payload: [UInt8]
    /// `apns-push-type`, e.g. `"alert"`.
    public var pushType: String
    /// `apns-priority`: 10, 5 or 1.
    public var priority: Int
    /// `apns-expiration`, UNIX seconds; 0 means "deliver once or not at all".
    public var expiration: Int
    /// `apns-collapse-id`, if any.
    public var collapseID: String?
    /// How many shards, numbered `0..<shardCount`.
    public var shardCount: Int
    /// How many tokens, over all shards.
    public var totalTokens: Int
    /// Whether workers may claim its shards.
    public var status: CampaignQueueStatus
    /// Which queue its shards wait in: the campaigns of its topic, or their notification lane.
    public var kind: CampaignKind
    /// Notifications per second, fleet-wide (``CampaignQueue/read(_:from:count:)`` paces the
    /// workers by it); nil sends as fast as the fleet can.
    public var rateLimit: Int?
    /// Whether the payload is a template rendered per recipient: each shard entry then carries
    /// the recipient's packed values after its token (``ShardEntry``).
    public var personalized: Bool

    public init(
        id: UUID,
        topic: String,
        environment: APNsEnvironment,
        payload: [UInt8],
        pushType: String,
        priority: Int,
        expiration: Int,
        collapseID: String? = nil,
        shardCount: Int,
        totalTokens: Int,
        status: CampaignQueueStatus = .running,
        kind: CampaignKind = .campaign,
        rateLimit: Int? = nil,
        personalized: Bool = false
    ) {
        self.id = id
        self.topic = topic
        self.environment = environment
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.shardCount = shardCount
        self.totalTokens = totalTokens
        self.status = status
        self.kind = kind
        self.rateLimit = rateLimit
        self.personalized = personalized
    }
}
