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

        #expect(try await lane.waitForNotification(topic: topic, environment: .sandbox, timeout: .seconds(1)) == false)
        try await fixture.queue.stageShards(campaign: fixture.campaign, shards: [(shard: 0, tokens: TestTokens.tokens(2, seed: 11))])
        try await fixture.queue.publish(descriptor)

        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign)?.definition.kind == .notification)
        #expect(try await fixture.queue.activeCampaigns(topic: topic, environment: .sandbox, kind: .notification) == [fixture.campaign])
        #expect(try await fixture.queue.activeCampaigns(topic: topic, environment: .sandbox).isEmpty, "campaign slots would take it")
        // One publication, one wake-up: the second wait times out.
        #expect(try await lane.waitForNotification(topic: topic, environment: .sandbox, timeout: .seconds(1)))
        #expect(try await lane.waitForNotification(topic: topic, environment: .sandbox, timeout: .seconds(1)) == false)

        try await fixture.queue.remove(campaign: fixture.campaign, topic: topic, environment: .sandbox, kind: .notification)
        #expect(try await fixture.queue.activeCampaigns(topic: topic, environment: .sandbox, kind: .notification).isEmpty)
        #expect(try await fixture.keys().isEmpty)
        try await waiter.shutdown()
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
