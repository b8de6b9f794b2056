/// What a campaign sends, and how: everything about it that is not its audience. The launch builds
/// one, Postgres keeps it (`campaigns` and `apps`), Redis gives it to the workers (`pf:{C}:meta`),
/// and each worker makes its notifications from it.
public struct CampaignDefinition: Sendable, Hashable {
    /// The app's bundle id (`apns-topic`), with the push type's suffix where it has one.
    public var topic: String
    /// Which APNs environment its tokens belong to.
    public var environment: APNsEnvironment
    /// The notification payload as sent (JSON bytes); for a ``personalized`` campaign, the
    /// template each recipient's payload is rendered from.
    public var payload: [UInt8]
    /// `apns-push-type`, e.g. `alert`.
    public var pushType: String
    /// `apns-priority`: 10 (immediately), 5 (power-considerate) or 1.
    public var priority: Int
    /// `apns-expiration` in seconds since 1970; 0 means "deliver once or not at all".
    public var expiration: Int
    /// `apns-collapse-id`, if any.
    public var collapseID: String?
    /// A campaign, or a notification worked from its topic's lane.
    public var kind: CampaignKind
    /// Notifications per second, fleet-wide; nil sends as fast as the fleet can.
    public var rateLimit: Int?
    /// Whether the payload is a template rendered per recipient from values its shards carry
    /// (``PayloadTemplate``).
    public var personalized: Bool

    public init(
        topic: String, environment: APNsEnvironment, payload: [UInt8], pushType: String = "alert", priority: Int = 10,
        expiration: Int = 0, collapseID: String? = nil, kind: CampaignKind = .campaign, rateLimit: Int? = nil, personalized: Bool = false
    ) {
        self.topic = topic
        self.environment = environment
        self.payload = payload
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.kind = kind
        self.rateLimit = rateLimit
        self.personalized = personalized
    }
}
