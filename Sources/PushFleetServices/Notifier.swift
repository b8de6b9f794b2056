public import Foundation
public import PushFleetCore
public import PushFleetPostgres
public import PushFleetRedis

/// Sends one notification now to a user's devices, a group's (everyone sharing a doorbell), or a
/// list of tokens: the doorbell lane.
///
/// The devices are read once, by the owner index, when the request is taken. The notification is
/// then launched as a campaign of kind ``CampaignKind/notification`` (recorded in Postgres, shards
/// in Redis, published in one step, exactly as ``Launcher`` does), into its topic's lane, which
/// every worker serves before campaign work and over a connection it keeps open. Its outcomes are
/// counted and folded as a campaign's are, and APNs' rejections update the registry the same way.
public struct Notifier: Sendable {
    /// Who gets it.
    public enum Audience: Sendable, Hashable {
        /// Every active device of one user.
        case user(String)
        /// Every active device of every user sharing the group.
        case group(String)
        /// These tokens, whether registered or not.
        case tokens([DeviceToken])
    }

    public struct Request: Sendable {
        /// Sending the same id twice sends once. Defaults to a new id.
        public var id: UUID?
        /// What it sends, and how; its ``CampaignDefinition/kind`` is set to
        /// ``CampaignKind/notification`` when it is launched.
        public var definition: CampaignDefinition
        public var audience: Audience
        /// Required token size in bytes (32 for the binary protocol), or `nil` for any.
        public var requiredTokenSize: Int?

        public init(id: UUID? = nil, definition: CampaignDefinition, audience: Audience, requiredTokenSize: Int? = nil) {
            self.id = id
            self.definition = definition
            self.audience = audience
            self.requiredTokenSize = requiredTokenSize
        }
    }

    public struct Result: Sendable, Hashable {
        public var id: UUID
        /// Devices it goes to, duplicates dropped.
        public var devices: Int
        /// `false` when a notification with this id existed already and nothing was sent again.
        public var created: Bool
    }

    /// The most tokens one notification may name; larger audiences are campaigns.
    public static let maximumTokens = 10_000

    public let launcher: Launcher

    public init(queue: CampaignQueue, store: CampaignStore) {
        self.launcher = Launcher(queue: queue, store: store)
    }

    /// Reads the audience's devices and publishes the notification to the lane.
    /// - Throws: ``LaunchError`` when the audience has no active device, names too many tokens, or
    ///   a token of the wrong size; errors of Postgres and Redis as they come.
    public func notify(_ request: Request) async throws -> Result {
        let tokens: [DeviceToken]
        let audience: String
        switch request.audience {
        case .user(let user):
            tokens = try await self.launcher.store.activeTokens(of: .user(user), topic: request.definition.topic, environment: request.definition.environment)
            audience = "user:\(user)"
        case .group(let group):
            tokens = try await self.launcher.store.activeTokens(of: .group(group), topic: request.definition.topic, environment: request.definition.environment)
            audience = "group:\(group)"
        case .tokens(let given):
            tokens = given
            audience = "tokens"
        }
        guard !tokens.isEmpty else { throw LaunchError.noDevices(audience, topic: request.definition.topic, environment: request.definition.environment) }
        guard tokens.count <= Self.maximumTokens else { throw LaunchError.tooManyDevices(tokens.count, maximum: Self.maximumTokens) }
        var definition = request.definition
        definition.kind = .notification
        var launch = Launcher.Request(id: request.id, definition: definition, shardSize: 1_000, requiredTokenSize: request.requiredTokenSize)
        launch.audience = audience
        var source = ArrayTokenSource(tokens)
        let result = try await self.launcher.launch(launch, tokens: &source)
        return Result(id: result.id, devices: result.total, created: result.created)
    }
}

/// Tokens already in memory.
public struct ArrayTokenSource: TokenSource {
    public var batchValues: RecipientValueList? { nil }
    private var tokens: ArraySlice<DeviceToken>

    public init(_ tokens: [DeviceToken]) { self.tokens = tokens[...] }

    public mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let batch = self.tokens.prefix(maximum)
        self.tokens = self.tokens.dropFirst(batch.count)
        return Array(batch)
    }
}
