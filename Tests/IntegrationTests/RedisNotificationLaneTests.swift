import Foundation
import PushFleetCore
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// The notification lane in Redis: a notification is published to its topic's lane set, not the
/// campaigns', keeps its kind, and wakes one waiting worker per publication.
@Suite struct RedisNotificationLaneTests {
    @Test func aNotificationGoesToTheLaneAndWakesOneWaiter() async throws {
        let fixture = try RedisQueueFixture()
        // A topic of this test alone: its wake-up list holds only what this test publishes.
        let topic = "com.example.lane.\(fixture.id)"
        var descriptor = fixture.descriptor(shardCount: 1, totalTokens: 2)
        descriptor.definition.topic = topic
        descriptor.definition.kind = .notification
        let waiter = RedisClient(configuration: fixture.client.configuration, logger: silentRedisLogger)
        let lane = CampaignQueue(client: waiter)

        #expect(try await lane.waitForNotification(topic: topic, environment: .sandbox, timeout: .seconds(1)) == .timedOut)
        try await fixture.queue.stageShards(campaign: fixture.campaign, shards: [(shard: 0, tokens: TestTokens.tokens(2, seed: 11))])
        try await fixture.queue.publish(descriptor)

        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign)?.definition.kind == .notification)
        #expect(try await fixture.queue.activeCampaigns(topic: topic, environment: .sandbox, kind: .notification) == [fixture.campaign])
        #expect(try await fixture.queue.activeCampaigns(topic: topic, environment: .sandbox).isEmpty, "campaign slots would take it")
        // One publication, one wake-up, which names it: the second wait times out.
        #expect(try await lane.waitForNotification(topic: topic, environment: .sandbox, timeout: .seconds(1)) == .published(fixture.campaign))
        #expect(try await lane.waitForNotification(topic: topic, environment: .sandbox, timeout: .seconds(1)) == .timedOut)

        try await fixture.queue.remove(campaign: fixture.campaign, topic: topic, environment: .sandbox, kind: .notification)
        #expect(try await fixture.queue.activeCampaigns(topic: topic, environment: .sandbox, kind: .notification).isEmpty)
        #expect(try await fixture.keys().isEmpty)
        try await waiter.shutdown()
        try await fixture.shutdown()
    }

    /// A ring's one Redis round trip: its shards staged and published by one pipeline; the
    /// notification then joins the lane and wakes a waiter with its id. Its first claim reads the
    /// descriptor and shard 0's length with it; a later shard's length is read after the claim.
    @Test func stagedAndPublishedInOnePipelineThenClaimedWithItsDescriptor() async throws {
        let fixture = try RedisQueueFixture()
        let topic = "com.example.lane.\(fixture.id)"
        var descriptor = fixture.descriptor(shardCount: 2, totalTokens: 5)
        descriptor.definition.topic = topic
        descriptor.definition.kind = .notification
        let tokens = TestTokens.tokens(5, seed: 12)
        let waiter = RedisClient(configuration: fixture.client.configuration, logger: silentRedisLogger)
        let lane = CampaignQueue(client: waiter)

        // Each pipeline runs its script by hash; a Redis that lost its scripts runs it again by source.
        _ = try await fixture.command("SCRIPT", "FLUSH")
        #expect(try await fixture.queue.stageAndPublish(descriptor, launch: "ring", shards: [(0, Array(tokens[0..<3])), (1, Array(tokens[3...]))]))
        #expect(try await fixture.queue.launchID(campaign: fixture.campaign) == "ring")
        #expect(try await fixture.queue.activeCampaigns(topic: topic, environment: .sandbox, kind: .notification) == [fixture.campaign])
        #expect(try await lane.waitForNotification(topic: topic, environment: .sandbox, timeout: .seconds(1)) == .published(fixture.campaign))
        // Published once: a second launch of the id publishes nothing of its own.
        #expect(try await fixture.queue.stageAndPublish(descriptor, launch: "again", shards: [(0, Array(tokens[0..<3])), (1, Array(tokens[3...]))]) == false)
        try await fixture.queue.discardStaged(campaign: fixture.campaign, launch: "again", shardCount: 2)

        _ = try await fixture.command("SCRIPT", "FLUSH")
        let first = try await fixture.queue.claimReadingDescriptor(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000)
        #expect(first.descriptor?.definition == descriptor.definition)
        #expect(first.descriptor?.shardCount == 2)
        let lease0 = try #require(first.lease)
        #expect(lease0.shard == 0 && lease0.tokenCount == 3 && lease0.cursor == 0)
        let second = try await fixture.queue.claimReadingDescriptor(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000)
        let lease1 = try #require(second.lease)
        #expect(lease1.shard == 1 && lease1.tokenCount == 2, "shard 1's length, read after its claim")
        let third = try await fixture.queue.claimReadingDescriptor(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000)
        #expect(third.descriptor != nil && third.lease == nil, "nothing left to claim")
        #expect(try await fixture.queue.read(lease1, from: 0, count: 10)?.tokens == Array(tokens[3...]))

        let unknown = try await fixture.queue.claimReadingDescriptor(campaign: UUID(), worker: "w1", leaseMilliseconds: 30_000)
        #expect(unknown.descriptor == nil && unknown.lease == nil)

        try await fixture.queue.remove(campaign: fixture.campaign, topic: topic, environment: .sandbox, kind: .notification)
        try await waiter.shutdown()
        try await fixture.shutdown()
    }

    /// A meta hash this worker cannot read: the shard claimed with it goes back at once, unsent and
    /// with no attempt counted, and the error names the field.
    @Test func aShardClaimedWithAnUnreadableDescriptorIsReleased() async throws {
        let fixture = try RedisQueueFixture()
        try await fixture.launch([2])
        _ = try await fixture.command("HSET", "pf:{\(fixture.id)}:meta", "priority", "high")
        await #expect(throws: RedisError.self) {
            try await fixture.queue.claimReadingDescriptor(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000)
        }
        _ = try await fixture.command("HSET", "pf:{\(fixture.id)}:meta", "priority", "10")
        let again = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000))
        #expect(again.shard == 0 && again.cursor == 0 && again.attempts == 0)
        try await fixture.shutdown()
    }

    /// A descriptor of a campaign keeps no `kind` field, so queues published before notifications
    /// existed read back as campaigns.
    @Test func aCampaignDescriptorHasNoKindField() async throws {
        let fixture = try RedisQueueFixture()
        try await fixture.launch([1])
        #expect(try await fixture.command("HEXISTS", "pf:{\(fixture.id)}:meta", "kind").integer == 0)
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign)?.definition.kind == .campaign)
        try await fixture.shutdown()
    }
}
