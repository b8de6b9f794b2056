public import Foundation
public import PushFleetCore
public import PushFleetPostgres
public import PushFleetRedis

/// Sends one notification now to a user's devices, a group's (everyone sharing a doorbell), or a
/// list of tokens: the doorbell lane.
///
/// The devices are read once, by the owner index, when the request is taken, and the notification
/// launched to them as a campaign of kind ``CampaignKind/notification`` (recorded in Postgres,
/// shards in Redis, published in one step, as ``Launcher`` does: for a user or a group without an
/// id, in one Postgres statement and one Redis pipeline), into its topic's lane, which
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
        if request.id == nil {
            switch request.audience {
            case .user(let user): return try await self.notifyRegistered(request, .user(user), label: "user:\(user)")
            case .group(let group): return try await self.notifyRegistered(request, .group(group), label: "group:\(group)")
            case .tokens: break
            }
        }
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

extension Notifier {
    /// Tokens per shard of a notification: one RPUSH a shard (``CampaignQueue/stageAndPublish(_:launch:shards:)``).
    static let shardSize = 1_000

    /// A new notification to a user's or a group's devices in two round trips: Postgres reads the
    /// devices and records the notification to them in one statement, then Redis stages its
    /// shards and publishes them in one pipeline (the wake-up follows); marked running after.
    /// A doorbell ring's latency is made of such round trips, each a wait for a busy CPU.
    private func notifyRegistered(_ request: Request, _ audience: DeviceAudience, label: String) async throws -> Result {
        let (queue, store) = (self.launcher.queue, self.launcher.store)
        var definition = request.definition
        definition.kind = .notification
        let id = UUID()
        let launch = Launcher.newLaunchID()
        let found = try await store.createNotification(
            id: id, definition: definition, to: audience, launch: launch, shardSize: Self.shardSize, maximumTokens: Self.maximumTokens,
            requiredTokenSize: request.requiredTokenSize
        )
        let tokens = found.tokens
        guard found.created else {
            if tokens.isEmpty { throw LaunchError.noDevices(label, topic: definition.topic, environment: definition.environment) }
            if let required = request.requiredTokenSize, let wrong = tokens.first(where: { $0.count != required }) {
                throw LaunchError.wrongTokenSize(wrong.count, required: required)
            }
            throw LaunchError.tooManyDevices(found.devices, maximum: Self.maximumTokens)
        }
        let shards = stride(from: 0, to: tokens.count, by: Self.shardSize).enumerated().map { shard, start in
            (shard: shard, tokens: Array(tokens[start..<min(start + Self.shardSize, tokens.count)]))
        }
        var campaign = NewCampaign(
            id: id, definition: definition, shardSize: Self.shardSize, shardTokenCounts: shards.map(\.tokens.count), totalTokens: tokens.count
        )
        campaign.audience = label
        let target = CampaignState.published(startingAt: nil, now: Date())
        do {
            // A new id: no other launch can have published it.
            try await queue.stageAndPublish(CampaignDescriptor(campaign, status: CampaignQueueStatus(target)), launch: launch, shards: shards)
        } catch {
            try? await queue.discardStaged(campaign: id, launch: launch, shardCount: shards.count)
            // Known not published: the row and its tokens go (nobody can launch this id again).
            // Otherwise the row stays `pending`, and the coordinator adopts it if it was published.
            let published: Bool? = try? await queue.launchID(campaign: id) != nil
            if published == false {
                try? await store.discardShardTokens(campaign: id, launch: launch)
                try? await store.discardUnpublishedCampaign(id, launch: launch)
            }
            throw error
        }
        // Published: the ring is on its way whatever happens here (the coordinator marks a
        // published `pending` notification running), and failing now would only make it ring twice.
        _ = try? await store.setState(id, to: target, from: [.pending])
        return Result(id: id, devices: tokens.count, created: true)
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
