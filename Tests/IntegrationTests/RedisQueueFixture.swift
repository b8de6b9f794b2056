import Foundation
import PushFleetCore
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// A fresh campaign id on the test Redis, with its own client, so queue tests run in parallel.
struct RedisQueueFixture {
    let client: RedisClient
    let queue: CampaignQueue
    let campaign = UUID()
    let topic = "com.example.pushfleet.test"

    init() throws {
        self.client = RedisClient(configuration: try RedisConfiguration(url: try IntegrationEnvironment.redisURL()), logger: silentRedisLogger)
        self.queue = CampaignQueue(client: self.client)
    }

    var id: String { self.campaign.uuidString.lowercased() }

    func descriptor(shardCount: Int, totalTokens: Int, status: CampaignQueueStatus = .running) -> CampaignDescriptor {
        CampaignDescriptor(
            id: self.campaign,
            definition: CampaignDefinition(
                topic: self.topic, environment: .sandbox, payload: Array("{\"aps\":{\"alert\":\"hi\"}}".utf8) + [0], pushType: "alert",
                priority: 10, expiration: 1_900_000_000, collapseID: "promo-1"
            ),
            shardCount: shardCount, totalTokens: totalTokens, status: status
        )
    }

    /// Stages `sizes[i]` tokens in shard `i` (tokens numbered across shards, seeded by the campaign) and publishes.
    @discardableResult
    func launch(_ sizes: [Int], status: CampaignQueueStatus = .running) async throws -> [[DeviceToken]] {
        var next = 0
        let shards = sizes.map { size in
            defer { next += size }
            return (next..<next + size).map { TestTokens.token($0, seed: 7) }
        }
        try await self.queue.stageShards(campaign: self.campaign, shards: shards.enumerated().map { (shard: $0.offset, tokens: $0.element) })
        try await self.queue.publish(self.descriptor(shardCount: sizes.count, totalTokens: next, status: status))
        return shards
    }

    /// Runs one command on the client's connection.
    func command(_ parts: any RedisArgumentConvertible...) async throws -> RedisReply {
        let arguments = parts.map(\.redisArgument)
        return try await self.client.withConnection { try $0.command(arguments) }
    }

    /// A checkpoint with nothing to report: the heartbeat.
    func heartbeat(_ lease: ShardLease, cursor: Int = 0, leaseMilliseconds: Int = 30_000) async throws -> CheckpointResult {
        try await self.queue.checkpoint(lease, CheckpointDelta(sequence: 1, cursor: cursor), leaseMilliseconds: leaseMilliseconds)
    }

    /// Every key of the campaign, as text.
    func keys() async throws -> Set<String> {
        let reply = try await self.command("KEYS", "pf:{\(self.id)}*")
        return Set(try #require(reply.array).compactMap(\.string))
    }

    /// The pending shard ids, front first.
    func pending() async throws -> [Int] {
        try #require(try await self.command("LRANGE", "pf:{\(self.id)}:pending", 0, -1).array).compactMap(\.integer)
    }

    /// Reaps until `count` expired leases were reaped; leases here last a few hundred milliseconds.
    func reap(_ count: Int, maximumAttempts: Int = 5) async throws {
        var reaped = 0
        for _ in 0..<200 where reaped < count {
            try await Task.sleep(for: .milliseconds(50))
            reaped += try await self.queue.reapExpiredLeases(campaign: self.campaign, maximumAttempts: maximumAttempts)
        }
        #expect(reaped == count)
    }

    func shutdown() async throws {
        try await self.client.shutdown()
    }
}
