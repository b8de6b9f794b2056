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
        public var topic: String
        public var environment: APNsEnvironment
        public var audience: Audience
        public var payload: Payload
        public var pushType: String
        public var priority: Int
        public var expiration: Int
        public var collapseID: String?
        /// Required token size in bytes (32 for the binary protocol), or `nil` for any.
        public var requiredTokenSize: Int?

        public init(
            id: UUID? = nil, topic: String, environment: APNsEnvironment, audience: Audience, payload: Payload, pushType: String = "alert",
            priority: Int = 10, expiration: Int = 0, collapseID: String? = nil, requiredTokenSize: Int? = nil
        ) {
            self.id = id
            self.topic = topic
            self.environment = environment
            self.audience = audience
            self.payload = payload
            self.pushType = pushType
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
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
            tokens = try await self.launcher.store.activeTokens(of: .user(user), topic: request.topic, environment: request.environment)
            audience = "user:\(user)"
        case .group(let group):
            tokens = try await self.launcher.store.activeTokens(of: .group(group), topic: request.topic, environment: request.environment)
            audience = "group:\(group)"
        case .tokens(let given):
            tokens = given
            audience = "tokens"
        }
        guard !tokens.isEmpty else { throw LaunchError.noDevices(audience, topic: request.topic, environment: request.environment) }
        guard tokens.count <= Self.maximumTokens else { throw LaunchError.tooManyDevices(tokens.count, maximum: Self.maximumTokens) }
        var launch = Launcher.Request(
            id: request.id, topic: request.topic, environment: request.environment, payload: request.payload, pushType: request.pushType,
            priority: request.priority, expiration: request.expiration, collapseID: request.collapseID, shardSize: 1_000,
            requiredTokenSize: request.requiredTokenSize
        )
        launch.kind = .notification
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
