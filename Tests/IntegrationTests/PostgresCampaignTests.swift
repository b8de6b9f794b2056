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
            #expect(record.environment == .production)
            #expect(record.state == .pending)
            #expect(record.total == 30)
            #expect(record.shardCount == 3)
            #expect(record.pending == 30)
            #expect(record.duplicatesDropped == 2)
            #expect(record.lastEventID == "0-0")
            #expect(record.startedAt == nil && record.finishedAt == nil)
            #expect(abs(record.createdAt.timeIntervalSinceNow) < 60)

            var again = PostgresFixture.campaign(topic: topic, shards: 5, perShard: 7, id: campaign.id)
            again.definition.payload = Array("other".utf8)
            #expect(try await store.createCampaign(again) == false)
            #expect(try await store.campaign(campaign.id) == record)
            #expect(try await store.launchedCampaign(campaign.id) == campaign)
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

    /// An outage pause resumes by itself, later each time; an operator's pause or resume clears the
    /// timer; a campaign not running is not paused.
    @Test func outagePausesResumeLaterEachTimeAndOperatorsOverrideThem() async throws {
        let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("outage"))
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.createCampaign(campaign)
            let id = campaign.id
            #expect(try await store.pauseForOutage(id, reason: "ServiceUnavailable (HTTP 503)", delay: .seconds(30), maximum: .seconds(100)) == nil)
            #expect(try await store.setState(id, to: .running, from: [.pending]))

            // Each wait as the span of times the database's clock may have added it to: from just
            // before the call to just after it (a loaded machine takes seconds over one query).
            var waits: [ClosedRange<TimeInterval>] = []
            for _ in 0..<4 {
                let before = Date()
                let resumeAt = try #require(try await store.pauseForOutage(id, reason: "ServiceUnavailable (HTTP 503)", delay: .seconds(30), maximum: .seconds(100)))
                let after = Date()
                waits.append(resumeAt.timeIntervalSince(after)...resumeAt.timeIntervalSince(before))
                let record = try #require(try await store.campaign(id))
                #expect(record.state == .paused && record.stateReason == "ServiceUnavailable (HTTP 503)" && record.autoResumeAt == resumeAt)
                #expect(try await store.resumeAfterOutage(id) == false, "not before its time")
                #expect(try await store.setState(id, to: .running, from: [.paused]))  // as `campaign resume` does
                #expect(try await store.campaign(id)?.autoResumeAt == nil, "an operator's resume clears the timer")
            }
            // 30, 60, then capped at 100 (the database's clock, give or take a second).
            for (wait, expected) in zip(waits, [30.0, 60, 100, 100]) {
                #expect(wait.lowerBound - 1 <= expected && expected <= wait.upperBound + 1, "\(waits)")
            }

            _ = try #require(try await store.pauseForOutage(id, reason: "ServiceUnavailable (HTTP 503)", delay: .milliseconds(1), maximum: .milliseconds(1)))
            try await Task.sleep(for: .milliseconds(50))
            #expect(try await store.resumeAfterOutage(id))
            let resumed = try #require(try await store.campaign(id))
            #expect(resumed.state == .running && resumed.stateReason == nil && resumed.autoResumeAt == nil)
        }
    }
}
