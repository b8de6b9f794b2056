public import PushFleetCore
public import PushFleetPostgres

/// The active tokens of a topic and environment in the registry, as a launch audience, read page by
/// page in token order (keyset pagination), so the audience is never held in memory.
public struct RegistryTokenSource: TokenSource {
    let store: CampaignStore
    let topic: String
    let environment: String
    private var after: DeviceToken? = nil

    public init(store: CampaignStore, topic: String, environment: String) {
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
