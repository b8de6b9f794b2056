import Foundation
import PushFleetCore
import PushFleetPostgres
import Testing

/// Campaign rows: idempotent creation, state transitions and their timestamps.
@Suite struct PostgresCampaignTests {
    @Test func createCampaignIsIdempotent() async throws {
        let topic = PostgresFixture.topic("create")
        let campaign = PostgresFixture.campaign(topic: topic, shards: 3, perShard: 10)
        try await PostgresFixture.withStore { store async throws in
            #expect(try await store.campaign(campaign.id) == nil)
            #expect(try await store.createCampaign(campaign))
            let record = try #require(try await store.campaign(campaign.id))
            #expect(record.topic == topic)
            #expect(record.environment == "production")
            #expect(record.state == .pending)
            #expect(record.total == 30)
            #expect(record.shardCount == 3)
            #expect(record.pending == 30)
            #expect(record.duplicatesDropped == 2)
            #expect(record.lastEventID == "0-0")
            #expect(record.startedAt == nil && record.finishedAt == nil)
            #expect(abs(record.createdAt.timeIntervalSinceNow) < 60)

            var again = PostgresFixture.campaign(topic: topic, shards: 5, perShard: 7, id: campaign.id)
            again.payload = Array("other".utf8)
            #expect(try await store.createCampaign(again) == false)
            #expect(try await store.campaign(campaign.id) == record)
            #expect(try await store.campaignDefinition(campaign.id) == campaign)
        }
    }

    @Test func inconsistentShardCountsChangeNothing() async throws {
        var campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("bad"))
        campaign.totalTokens += 1
        try await PostgresFixture.withStore { store async throws in
            let error = await #expect(throws: PostgresStoreError.self) { _ = try await store.createCampaign(campaign) }
            #expect(error?.code == .invalidInput)
            #expect(try await store.campaign(campaign.id) == nil)
        }
    }

    @Test func stateTransitionsSetTheirTimestamps() async throws {
        let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("states"))
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.createCampaign(campaign)
            let id = campaign.id
            #expect(try await store.setState(id, to: .completed, from: [.running]) == false)
            #expect(try await store.setState(id, to: .running, from: []) == false)
            #expect(try await store.setState(id, to: .running, from: [.pending]))
            let started = try #require(try await store.campaign(id)?.startedAt)
            #expect(try await store.campaign(id)?.state == .running)

            #expect(try await store.setState(id, to: .paused, from: [.running]))
            #expect(try await store.campaigns(in: [.paused]).map(\.id).contains(id))
            #expect(try await store.campaigns(in: [.running]).map(\.id).contains(id) == false)
            try await Task.sleep(for: .milliseconds(20))
            #expect(try await store.setState(id, to: .running, from: [.paused]))
            #expect(try await store.campaign(id)?.startedAt == started)  // the first start counts
            #expect(try await store.campaign(id)?.finishedAt == nil)

            #expect(try await store.setState(id, to: .completed, from: [.running, .paused]))
            let finished = try #require(try await store.campaign(id))
            #expect(finished.state == .completed)
            #expect(try #require(finished.finishedAt) >= started)
            #expect(try await store.setState(id, to: .running, from: [.pending, .paused]) == false)
            #expect(try await store.setState(UUID(), to: .running, from: [.pending]) == false)
        }
    }

    @Test func cancelledCountIsMonotonic() async throws {
        let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("cancel"))
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.createCampaign(campaign)
            #expect(try await store.setState(campaign.id, to: .cancelled, from: [.pending, .running]))
            try await store.setCancelled(campaign.id, count: 25)
            try await store.setCancelled(campaign.id, count: 20)
            let record = try #require(try await store.campaign(campaign.id))
            #expect(record.cancelled == 25)
            #expect(record.pending == 5)
            #expect(record.finishedAt != nil)
            let error = await #expect(throws: PostgresStoreError.self) { try await store.setCancelled(UUID(), count: 1) }
            #expect(error?.code == .unknownCampaign)
        }
    }
}
