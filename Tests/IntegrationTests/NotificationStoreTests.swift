import Foundation
import PushFleetCore
import PushFleetPostgres
import Testing

/// A notification's records in Postgres: its devices are kept when its queue is removed (a
/// campaign's are not), its per-device outcomes read from them, and old ones pruned, campaigns never.
@Suite struct NotificationStoreTests {
    @Test func aFinishedNotificationKeepsItsDevicesUntilPruned() async throws {
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("rings")
            let phones = PostgresFixture.tokens(3)
            var ring = PostgresFixture.campaign(topic: topic, shards: 1, perShard: 3)
            ring.definition.kind = .notification
            ring.audience = "group:front-door"
            let campaign = PostgresFixture.campaign(topic: topic, shards: 1, perShard: 3)
            let audience = PostgresFixture.tokens(3)
            for (record, tokens) in [(ring, phones), (campaign, audience)] {
                #expect(try await store.createCampaign(record))
                try await store.storeShardTokens(campaign: record.id, launch: "l1", shards: [(shard: 0, tokens: tokens)])
                try await store.recordLaunch(record.id, launch: "l1")
                #expect(try await store.setState(record.id, to: .running, from: [.pending]))
                #expect(try await store.apply(ProgressUpdate(campaign: record.id, accepted: 2, rejected: [:], resent: 0, doneShards: 0, lastEventID: "1-0", cursors: [0: 2])))
            }
            var report = try #require(try await store.notificationReport(ring.id))
            #expect(report.audience == "group:front-door")
            #expect(report.devices.map(\.token) == phones)
            #expect(report.devices.map(\.status) == [.accepted, .accepted, .pending], "the folded cursor is 2")
            #expect(try await store.notificationReport(campaign.id) == nil, "a campaign is no notification")

            for record in [ring, campaign] {
                #expect(try await store.setState(record.id, to: .completed, from: [.running]))
                try await store.markQueueRemoved(record.id)
            }
            report = try #require(try await store.notificationReport(ring.id))
            #expect(report.devices.map(\.status) == [.accepted, .accepted, .accepted])

            // The third device of each is rejected: the ring's failure goes when it is pruned.
            for (record, token) in [(ring, phones[2]), (campaign, audience[2])] {
                var update = ProgressUpdate(
                    campaign: record.id, accepted: 2, rejected: ["Unregistered": 1], resent: 0, doneShards: 0, lastEventID: "2-0", cursors: [0: 3]
                )
                update.rejections = [AppliedRejection(token: token, reason: .unregistered, shard: 0)]
                #expect(try await store.apply(update))
                #expect(try await store.tokenFailures(campaign: record.id).map(\.token) == [token])
            }
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 0) == nil, "a finished campaign's tokens go")
            #expect(try await store.pruneShardTokens() >= 0)
            #expect(try await store.shardTokens(campaign: ring.id, shard: 0) == phones, "a notification's stay")

            // Other suites' notifications share the database: only this ring's fate is asserted.
            _ = try await store.pruneNotifications(finishedBefore: Date(timeIntervalSinceNow: -3_600))
            #expect(try await store.campaign(ring.id) != nil, "not old enough")
            #expect(try await store.pruneNotifications(finishedBefore: Date(timeIntervalSinceNow: 60)) >= 1)
            #expect(try await store.campaign(ring.id) == nil)
            #expect(try await store.tokenFailures(campaign: ring.id).isEmpty, "a pruned ring's failures go with it")
            #expect(try await store.campaign(campaign.id) != nil, "campaigns are never pruned")
            #expect(try await store.tokenFailures(campaign: campaign.id).map(\.token) == [audience[2]])
        }
    }
}
