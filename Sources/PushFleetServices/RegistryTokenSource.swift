public import PushFleetCore
public import PushFleetPostgres

/// The active tokens of a topic and environment in the registry, as a launch audience, read page by
/// page in token order (keyset pagination), so the audience is never held in memory.
public struct RegistryTokenSource: TokenSource {
    /// The registry keeps no template fields: no values.
    public var batchValues: RecipientValueList? { nil }
    let store: CampaignStore
    let topic: String
    let environment: APNsEnvironment
    private var after: DeviceToken? = nil

    public init(store: CampaignStore, topic: String, environment: APNsEnvironment) {
        self.store = store
        self.topic = topic
        self.environment = environment
    }

    public mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let tokens = try await self.store.activeTokens(topic: self.topic, environment: self.environment, after: self.after, limit: maximum)
        self.after = tokens.last
        return tokens
    }
}

/// The active tokens of a topic and environment in the registry, planned by the locale and time
/// zone their devices registered (``CampaignStore/registerDevice(_:)``).
public struct RegistryPlannedTokenSource: PlannedTokenSource {
    /// The registry keeps no template fields: no values.
    public var batchValues: RecipientValueList? { nil }
    let store: CampaignStore
    let topic: String
    let environment: APNsEnvironment
    public private(set) var plan: LaunchPlan
    private var after: DeviceToken? = nil

    public init(store: CampaignStore, topic: String, environment: APNsEnvironment, plan: LaunchPlan) {
        self.store = store
        self.topic = topic
        self.environment = environment
        self.plan = plan
    }

    public mutating func next(upTo maximum: Int) async throws -> [(token: DeviceToken, part: Int)] {
        let recipients = try await self.store.activeRecipients(topic: self.topic, environment: self.environment, after: self.after, limit: maximum)
        self.after = recipients.last?.token
        return try self.plan.parts(of: recipients.map { ($0.token, $0.locale, $0.timeZone) }) { index, error in
            LaunchError(message: "registry device \(recipients[index].token.hexString): \(error)")
        }
    }
}
