import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetServices
import Testing

/// A ring's launch in Postgres: one statement reads a user's or a group's active devices and
/// records the notification to them (its row, its shards, their tokens), or records nothing.
@Suite struct NotificationLaunchStoreTests {
    private static let definition = CampaignDefinition(
        topic: "", environment: .production, payload: Array(#"{"aps":{"alert":"Ding dong"}}"#.utf8), pushType: "alert", priority: 10,
        expiration: 0, collapseID: nil, kind: .notification
    )

    /// Three residents with two phones each share a door; a third phone of one is unregistered,
    /// and one more phone is in another topic. Returns the group, the users and the active phones.
    private static func household(_ store: CampaignStore, topic: String) async throws -> (group: String, users: [String], phones: [DeviceToken]) {
        let run = UUID().uuidString.prefix(8)
        let users = (1...3).map { "resident-\($0)-\(run)" }
        let phones = PostgresFixture.tokens(8)
        for (index, phone) in phones.prefix(7).enumerated() {
            _ = try await store.registerDevice(
                DeviceRegistration(token: phone, topic: topic, environment: .production, user: users[index % 3], platform: "ios", registeredAt: Date(timeIntervalSinceNow: -60))
            )
        }
        _ = try await store.registerDevice(
            DeviceRegistration(token: phones[7], topic: topic + ".other", environment: .production, user: users[0], platform: "ios", registeredAt: Date())
        )
        try await store.markTokens([(token: phones[6], status: .unregistered, reason: .unregistered, since: Date())], topic: topic, environment: .production)
        let group = "front-door-\(run)"
        try await store.setGroupMembers(group, users: users)
        return (group, users, Array(phones.prefix(6)))
    }

    private static func definition(topic: String) -> CampaignDefinition {
        var definition = Self.definition
        definition.topic = topic
        return definition
    }

    @Test func aGroupsActiveDevicesAreReadAndTheRingRecordedToThem() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("ring-launch")
            let (group, _, phones) = try await Self.household(store, topic: topic)
            let id = UUID()
            let created = try await store.createNotification(
                id: id, definition: Self.definition(topic: topic), to: .group(group), launch: "ring1", shardSize: 1_000, maximumTokens: 10_000
            )
            #expect(created.created)
            #expect(created.tokens == PostgresFixture.sorted(phones), "the six active phones of this topic, in byte order")

            let record = try #require(try await store.campaign(id))
            #expect(record.kind == .notification)
            #expect(record.state == .pending)
            #expect(record.total == 6 && record.shardCount == 1)
            #expect(record.topic == topic)
            #expect(try await store.shardTokens(campaign: id, shard: 0) == PostgresFixture.sorted(phones), "the durable copy, under the launch")
            #expect(try await store.notificationReport(id)?.audience == "group:\(group)")
            let launched = try #require(try await store.launchedCampaign(id))
            #expect(launched.shardTokenCounts == [6])
            #expect(launched.definition == Self.definition(topic: topic))
        }
    }

    @Test func aUsersDevicesGoInShardsOfTheGivenSize() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("ring-launch")
            let (_, users, phones) = try await Self.household(store, topic: topic)
            let mine = PostgresFixture.sorted([phones[0], phones[3]])
            let id = UUID()
            let created = try await store.createNotification(
                id: id, definition: Self.definition(topic: topic), to: .user(users[0]), launch: "ring1", shardSize: 1, maximumTokens: 10
            )
            #expect(created.created)
            #expect(created.tokens == mine, "not the unregistered phone, nor the other topic's")
            let record = try #require(try await store.campaign(id))
            #expect(record.total == 2 && record.shardCount == 2)
            #expect(try await store.shardTokens(campaign: id, shards: [0, 1]) == [0: [mine[0]], 1: [mine[1]]])
            #expect(try await store.launchedCampaign(id)?.shardTokenCounts == [1, 1])
        }
    }

    @Test func noDeviceOrTooManyRecordsNothing() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("ring-launch")
            let (group, users, phones) = try await Self.household(store, topic: topic)
            let definition = Self.definition(topic: topic)

            let nobody = UUID()
            let none = try await store.createNotification(
                id: nobody, definition: definition, to: .user("nobody-\(users[0])"), launch: "l", shardSize: 1_000, maximumTokens: 10
            )
            #expect(!none.created && none.tokens.isEmpty)
            #expect(try await store.campaign(nobody) == nil)

            let crowd = UUID()
            let many = try await store.createNotification(
                id: crowd, definition: definition, to: .group(group), launch: "l", shardSize: 1_000, maximumTokens: 4
            )
            #expect(!many.created && many.devices == 6)
            #expect(many.tokens == Array(PostgresFixture.sorted(phones).prefix(5)), "the maximum and one more: enough to say there are too many")
            #expect(try await store.campaign(crowd) == nil)
            #expect(try await store.shardTokens(campaign: crowd, shard: 0) == nil)

            await #expect(throws: PostgresStoreError.self) {
                try await store.createNotification(id: UUID(), definition: definition, to: .group(""), launch: "l", shardSize: 1_000, maximumTokens: 4)
            }
        }
    }

    /// Over the binary protocol (32-byte tokens), a registered phone with a longer token fails the
    /// ring, and the statement records nothing; the same phone is rung over HTTP/2, which takes
    /// any size.
    @Test func aTokenTheBinaryProtocolCannotCarryFailsTheRingAndLeavesNothing() async throws {
        let redis = try RedisQueueFixture()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("ring-launch")
            let user = "long-token-\(UUID().uuidString.prefix(8))"
            let long = try DeviceToken(bytes: [UInt8](repeating: 0xAB, count: 64))
            _ = try await store.registerDevice(DeviceRegistration(token: long, topic: topic, environment: .production, user: user, platform: "ios", registeredAt: Date()))
            let notifier = Notifier(queue: redis.queue, store: store)
            let request = Notifier.Request(definition: Self.definition(topic: topic), audience: .user(user), requiredTokenSize: 32)
            let error = await #expect(throws: LaunchError.self) { try await notifier.notify(request) }
            #expect(error?.message.contains("a token is 64 bytes") == true, "\(String(describing: error))")
            #expect(try await store.campaigns(in: CampaignState.allCases).filter { $0.topic == topic }.isEmpty, "nothing recorded")
            #expect(try await redis.queue.activeCampaigns(topic: topic, environment: .production, kind: .notification).isEmpty)

            let sent = try await notifier.notify(Notifier.Request(definition: Self.definition(topic: topic), audience: .user(user)))
            #expect(sent.created && sent.devices == 1)
            #expect(try await store.campaign(sent.id)?.state == .running)
            #expect(try await redis.queue.activeCampaigns(topic: topic, environment: .production, kind: .notification) == [sent.id])
            let lease = try #require(try await redis.queue.claim(campaign: sent.id, worker: "test", leaseMilliseconds: 30_000))
            #expect(try await redis.queue.read(lease, from: 0, count: 10)?.tokens == [long])
            try await redis.queue.remove(campaign: sent.id, topic: topic, environment: .production, kind: .notification)
        }
        try await redis.shutdown()
    }

    /// Sent twice with one id, the statement records once; the second finds the id taken.
    @Test func anIdRecordedAlreadyIsNotRecordedAgain() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("ring-launch")
            let (group, _, _) = try await Self.household(store, topic: topic)
            let id = UUID()
            let first = try await store.createNotification(
                id: id, definition: Self.definition(topic: topic), to: .group(group), launch: "a", shardSize: 1_000, maximumTokens: 10
            )
            let second = try await store.createNotification(
                id: id, definition: Self.definition(topic: topic), to: .group(group), launch: "b", shardSize: 1_000, maximumTokens: 10
            )
            #expect(first.created && !second.created)
            #expect(second.tokens == first.tokens)
            #expect(try await store.shardTokens(campaign: id, shard: 0) == first.tokens, "launch a's, as recorded")
        }
    }
}
