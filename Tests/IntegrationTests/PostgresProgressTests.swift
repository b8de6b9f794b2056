import Foundation
import PushFleetCore
@testable import PushFleetPostgres
import PushFleetTestSupport
import Testing

/// `CampaignStore.apply`: idempotent event application, monotonic counters, rejected tokens in
/// `token_failures` and in the registry.
@Suite struct PostgresProgressTests {
    @Test(arguments: [
        ("BadDeviceToken", TokenStatus.quarantined), ("DeviceTokenNotForTopic", .quarantined), ("InvalidToken", .invalid),
        ("Unregistered", .unregistered), ("ExpiredToken", .unregistered), ("TopicDisallowed", nil), ("PayloadTooLarge", nil),
        ("BadCertificateEnvironment", nil), ("TooManyRequests", nil),
    ] as [(String, TokenStatus?)])
    func rejectionReasonDecidesTheRegistryStatus(_ reason: String, _ status: TokenStatus?) {
        // Only reasons about the token itself touch the registry; a wrong environment looks like a
        // bad token, so those are quarantined, not declared dead.
        #expect(TokenStatus(rejectionReason: RejectionReason(reason)) == status)
    }

    /// A fold's cursors only ever rise; a rebuild counts the last fold's in-flight tokens as
    /// re-sent once, starts the stream over and raises the generation, so that a fold read from
    /// the lost queue and written late is refused.
    @Test func cursorsRiseAndARebuildRefusesFoldsOfTheLostQueue() async throws {
        let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("rebuild"), shards: 3, perShard: 10)
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.createCampaign(campaign)
            #expect(try await store.setState(campaign.id, to: .running, from: [.pending]))
            var fold = ProgressUpdate(
                campaign: campaign.id, accepted: 14, rejected: [:], resent: 0, doneShards: 1, lastEventID: "5-0",
                cursors: [0: 10, 1: 4], inFlight: 3, generation: 0, foldSequence: 7
            )
            #expect(try await store.apply(fold))
            fold.cursors = [1: 2]  // a lower cursor never lowers the stored one
            fold.inFlight = 50  // nor does an older snapshot's in-flight count replace a newer one's
            fold.foldSequence = 6
            #expect(try await store.apply(fold))
            var point = try #require(try await store.recoveryPoint(campaign.id))
            #expect((point.cursors, point.tokenCounts, point.inFlight, point.foldSequence) == ([10, 4, 0], [10, 10, 10], 3, 7))
            #expect(try await store.campaign(campaign.id)?.foldSequence == 7)

            #expect(try await store.beginQueueRebuild(campaign.id, generation: 0))
            #expect(try await store.beginQueueRebuild(campaign.id, generation: 0) == false, "another coordinator rebuilt it already")
            var record = try #require(try await store.campaign(campaign.id))
            #expect((record.resent, record.lastEventID, record.queueGeneration) == (3, "0-0", 1))
            point = try #require(try await store.recoveryPoint(campaign.id))
            #expect((point.inFlight, point.generation) == (0, 1))

            var late = fold
            late.accepted = 20
            late.cursors = [1: 10]
            await #expect { try await store.apply(late) } throws: { ($0 as? PostgresStoreError)?.code == .queueRebuilt }
            #expect(try await store.campaign(campaign.id)?.accepted == 14, "a fold of the lost queue is refused")
            late.generation = 1
            #expect(try await store.apply(late))
            record = try #require(try await store.campaign(campaign.id))
            #expect(record.accepted == 20)
            #expect(try await store.recoveryPoint(campaign.id)?.cursors == [10, 10, 0])
        }
    }

    @Test func applyIsIdempotentAndOrderedByStreamID() async throws {
        let topic = PostgresFixture.topic("apply")
        let tokens = PostgresFixture.tokens(5)
        let campaign = PostgresFixture.campaign(topic: topic, shards: 3, perShard: 10)
        let registered = Date(timeIntervalSince1970: 1_700_000_000)
        let unregisteredAt = Int64(1_700_000_100_000)
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.importTokens(tokens, topic: topic, environment: .production, registeredAt: registered)
            _ = try await store.createCampaign(campaign)
            let update = ProgressUpdate(
                campaign: campaign.id, accepted: 10, rejected: ["BadDeviceToken": 1, "InvalidToken": 1, "Unregistered": 2],
                resent: 1, retried: 4, doneShards: 1,
                rejections: [
                    AppliedRejection(token: tokens[0], reason: .badDeviceToken, shard: 0),
                    AppliedRejection(token: tokens[1], reason: .invalidToken, shard: 0),
                    AppliedRejection(token: tokens[2], reason: .unregistered, shard: 1, apnsTimestampMilliseconds: unregisteredAt),
                    // APNs' timestamp predates the registration: recorded, but the token stays active.
                    AppliedRejection(token: tokens[3], reason: .unregistered, shard: 1, apnsTimestampMilliseconds: 1_600_000_000_000),
                ],
                doneShardIDs: [0], lastEventID: "1700000000000-5"
            )
            #expect(try await store.apply(update))
            #expect(try await store.apply(update) == false)
            var older = update
            older.lastEventID = "1700000000000-4"
            older.accepted = 100
            older.rejections = [AppliedRejection(token: tokens[4], reason: .invalidToken, shard: 2)]
            #expect(try await store.apply(older) == false)

            let record = try #require(try await store.campaign(campaign.id))
            #expect(record.accepted == 10)
            #expect(record.rejected == ["BadDeviceToken": 1, "InvalidToken": 1, "Unregistered": 2])
            #expect(record.resent == 1)
            #expect(record.retried == 4)
            #expect(record.doneShards == 1)
            #expect(record.lastEventID == "1700000000000-5")
            #expect(record.pending == 30 - 10 - 4)

            let failures = try await store.tokenFailures(campaign: campaign.id)
            #expect(Set(failures.map(\.token)) == Set(tokens[0..<4]))
            #expect(failures.first { $0.token == tokens[2] }?.apnsTimestampMilliseconds == unregisteredAt)
            #expect(failures.first { $0.token == tokens[2] }?.shard == 1)
            #expect(failures.first { $0.token == tokens[0] }?.apnsTimestampMilliseconds == nil)

            let status = { (token: DeviceToken) in try await store.tokenStatus(token, topic: topic, environment: .production) }
            #expect(try await status(tokens[0]) == .quarantined)
            #expect(try await status(tokens[1]) == .invalid)
            #expect(try await status(tokens[2]) == .unregistered)
            #expect(try await status(tokens[3]) == .active)
            #expect(try await status(tokens[4]) == .active)

            // since = APNs' timestamp: a registration just before it does not revive the token, one after does.
            let unregisteredDate = Date(timeIntervalSince1970: TimeInterval(unregisteredAt) / 1000)
            _ = try await store.importTokens([tokens[2]], topic: topic, environment: .production, registeredAt: unregisteredDate - 1)
            #expect(try await status(tokens[2]) == .unregistered)
            _ = try await store.importTokens([tokens[2]], topic: topic, environment: .production, registeredAt: unregisteredDate + 1)
            #expect(try await status(tokens[2]) == .active)
        }
    }

    /// A campaign's rejections mark the tokens the registry holds, and only those: the others (an
    /// audience from a file) are recorded with the campaign. A token recorded twice (a queue
    /// rebuilt from Postgres sends again what it had sent) is read once, with its first verdict.
    @Test func rejectionsMarkOnlyRegisteredTokensAndAreReadOncePerToken() async throws {
        let topic = PostgresFixture.topic("held")
        let tokens = PostgresFixture.tokens(3)
        let (held, stray) = (tokens[0], tokens[1])
        let campaign = PostgresFixture.campaign(topic: topic, shards: 1, perShard: 10)
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.importTokens([held], topic: topic, environment: .production, registeredAt: Date() - 3_600)
            _ = try await store.createCampaign(campaign)
            let first = ProgressUpdate(
                campaign: campaign.id, accepted: 0, rejected: ["BadDeviceToken": 2], resent: 0, doneShards: 0,
                rejections: [AppliedRejection(token: held, reason: .badDeviceToken, shard: 0), AppliedRejection(token: stray, reason: .badDeviceToken, shard: 0)],
                lastEventID: "1700000000000-1"
            )
            #expect(try await store.apply(first))
            var again = first
            again.rejections = [AppliedRejection(token: stray, reason: .unregistered, shard: 0, apnsTimestampMilliseconds: 1_700_000_000_000)]
            again.lastEventID = "1700000000000-2"
            #expect(try await store.apply(again))

            let status = { (token: DeviceToken) in try await store.tokenStatus(token, topic: topic, environment: .production) }
            #expect(try await status(held) == .quarantined)
            #expect(try await status(stray) == nil, "a token the registry does not hold is not added to it")
            let failures = try await store.tokenFailures(campaign: campaign.id)
            #expect(failures.map(\.token).sorted { $0.precedesInByteOrder($1) } == [held, stray].sorted { $0.precedesInByteOrder($1) })
            #expect(failures.first { $0.token == stray }?.reason == .badDeviceToken, "the first verdict recorded")
            #expect(try await store.tokenFailures(campaign: campaign.id, after: failures[0].token) == [failures[1]])
        }
    }

    /// The marks one statement writes: each token once, with its latest mark (of equally late
    /// ones, the last given), in byte order. Runs of one token sit anywhere in the input.
    @Test func marksKeepEachTokensLatestInByteOrder() {
        let tokens = PostgresFixture.tokens(40)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        var marks: [TokenMark] = []
        for (n, token) in tokens.enumerated() {
            // Token n is marked n % 4 + 1 times, at times that go down, up and repeat.
            for k in 0...(n % 4) {
                let since = t0 + Double([3, 1, 3, 2][k])
                let reason = RejectionReason("reason-\(n)-\(k)")
                marks.append(TokenMark(token: token, status: .unregistered, reason: reason, since: since))
            }
        }
        marks.shuffle()
        var expected: [DeviceToken: (since: Date, reason: RejectionReason)] = [:]
        for mark in marks where expected[mark.token].map({ mark.since >= $0.since }) ?? true { expected[mark.token] = (mark.since, mark.reason) }

        let unique = CampaignStore.latestInByteOrder(marks)
        #expect(unique.map(\.token) == tokens.sorted { $0.precedesInByteOrder($1) })
        for mark in unique {
            #expect(mark.since == expected[mark.token]?.since)
            #expect(mark.reason == expected[mark.token]?.reason, "of equally late marks, the last given")
        }
        #expect(CampaignStore.latestInByteOrder([]).isEmpty)
    }

    @Test func streamIDsCompareNumerically() async throws {
        let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("ids"))
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.createCampaign(campaign)
            func update(_ id: String, shard: Int) -> ProgressUpdate {
                ProgressUpdate(campaign: campaign.id, accepted: 0, rejected: [:], resent: 0, doneShards: 0, doneShardIDs: [shard], lastEventID: id)
            }
            #expect(try await store.apply(update("999-9", shard: 0)))
            #expect(try await store.apply(update("1000-0", shard: 1)))  // longer, so greater, though "1" < "9"
            #expect(try await store.apply(update("1000-10", shard: 2)))  // "10" > "9" as numbers
            #expect(try await store.apply(update("1000-9", shard: 2)) == false)
            #expect(try await store.campaign(campaign.id)?.lastEventID == "1000-10")

            let bad = await #expect(throws: PostgresStoreError.self) { _ = try await store.apply(update("12-x", shard: 0)) }
            #expect(bad?.code == .invalidEventID)
            var unknown = update("2000-0", shard: 0)
            unknown.campaign = UUID()
            let missing = await #expect(throws: PostgresStoreError.self) { _ = try await store.apply(unknown) }
            #expect(missing?.code == .unknownCampaign)
        }
    }

    @Test func countersAreMonotonicAndCounterOnlyUpdatesAlwaysApply() async throws {
        let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("monotonic"))
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.createCampaign(campaign)
            func counters(_ accepted: Int, _ rejected: Int, id: String) -> ProgressUpdate {
                ProgressUpdate(campaign: campaign.id, accepted: accepted, rejected: ["InvalidToken": rejected], resent: accepted / 10, doneShards: accepted / 10, lastEventID: id)
            }
            #expect(try await store.apply(counters(20, 3, id: "5-0")))
            #expect(try await store.apply(counters(10, 1, id: "5-0")))  // counters only: applied, but never lower
            var record = try #require(try await store.campaign(campaign.id))
            #expect((record.accepted, record.rejected, record.resent, record.doneShards) == (20, ["InvalidToken": 3], 2, 2))
            #expect(try await store.apply(counters(25, 4, id: "0-0")))  // an older id does not move last_event_id back
            record = try #require(try await store.campaign(campaign.id))
            #expect((record.accepted, record.rejected["InvalidToken"], record.lastEventID) == (25, 4, "5-0"))
        }
    }

    @Test func tokenFailuresPastTheirRetentionArePruned() async throws {
        let topic = PostgresFixture.topic("prune")
        let tokens = PostgresFixture.tokens(4)
        let old = PostgresFixture.campaign(topic: topic, shards: 1, perShard: 10)
        let recent = PostgresFixture.campaign(topic: topic, shards: 1, perShard: 10)
        try await PostgresFixture.withStore { store async throws in
            // The old campaign's rejections in three folds of one, two and one (three batches, the
            // unit pruned), the recent one's in one.
            let folds: [(NewCampaign, [[DeviceToken]])] = [(old, [[tokens[0]], [tokens[1], tokens[2]], [tokens[3]]]), (recent, [tokens])]
            for (campaign, batches) in folds {
                _ = try await store.createCampaign(campaign)
                for (index, batch) in batches.enumerated() {
                    let rejections = batch.map { AppliedRejection(token: $0, reason: .badDeviceToken, shard: 0) }
                    _ = try await store.apply(
                        ProgressUpdate(campaign: campaign.id, accepted: 0, rejected: ["BadDeviceToken": 4], resent: 0, doneShards: 0,
                                       rejections: rejections, lastEventID: "1700000000000-\(index + 1)")
                    )
                }
            }
            try await store.ageTokenFailures(campaign: old.id, bySeconds: 31 * 86_400)
            let cutoff = Date(timeIntervalSinceNow: -30 * 86_400)
            // Two batches, oldest first: three rejections, the newest batch's token left.
            #expect(try await store.pruneTokenFailures(observedBefore: cutoff, limit: 2) == 2)
            #expect(try await store.tokenFailures(campaign: old.id).map(\.token) == [tokens[3]])
            #expect(try await store.pruneTokenFailures(observedBefore: cutoff) >= 1)
            #expect(try await store.tokenFailures(campaign: old.id).isEmpty)
            #expect(try await store.tokenFailures(campaign: recent.id).count == 4)
            // The counts stay: retention is about per-token rows only.
            #expect(try await store.campaign(old.id)?.rejected == ["BadDeviceToken": 4])
        }
    }
}

/// Schemas 16 and 17 on a database that already holds rejections: 16 drops the (campaign, token)
/// key and keeps every row; 17 moves the rows into batches, in the order they were written, and the
/// store goes on recording and reading them.
@Suite struct SchemaUpgradeTests {
    @Test func rejectionsRecordedUnderSchemas15And16SurviveTheUpgradeTo17() async throws {
        let name = "pushfleet_upgrade_\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        try await PostgresFixture.withStore { store in try await store.execute(testSQL: "CREATE DATABASE \(name)") }
        var url = try #require(URLComponents(string: try IntegrationEnvironment.postgresURL()))
        url.path = "/\(name)"
        let store = CampaignStore(configuration: try PostgresConfiguration(url: try #require(url.string)), logger: PostgresFixture.logger)
        let running = Task { await store.run() }
        do {
            try await store.migrate(through: 15)
            #expect(try await store.schemaVersions() == Array(1...15))
            let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("upgrade"), shards: 1, perShard: 10)
            let tokens = PostgresFixture.tokens(6)
            _ = try await store.createCampaign(campaign)
            // Rows as the coordinators of those schemas wrote them, each in its own transaction.
            func record(_ token: DeviceToken, _ reason: String, timestamp: String = "NULL") async throws {
                try await store.execute(
                    testSQL: """
                        INSERT INTO token_failures (campaign_id, token, reason, shard, apns_timestamp)
                        VALUES ('\(campaign.id)', '\\x\(token.hexString)', '\(reason)', 0, \(timestamp))
                        """
                )
            }
            try await record(tokens[0], "BadDeviceToken")
            try await record(tokens[1], "Unregistered", timestamp: "1700000000123")

            try await store.migrate(through: 16)
            // One fold of three rows, as schema 16 wrote them in one statement: a token's second row
            // (a rebuilt queue's; the first verdict is the one read) and two new tokens whose
            // reasons and timestamps differ, so that a batch's arrays out of step would show.
            try await store.execute(
                testSQL: """
                    INSERT INTO token_failures (campaign_id, token, reason, shard, apns_timestamp) VALUES
                        ('\(campaign.id)', '\\x\(tokens[2].hexString)', 'BadDeviceToken', 1, NULL),
                        ('\(campaign.id)', '\\x\(tokens[1].hexString)', 'BadDeviceToken', 2, NULL),
                        ('\(campaign.id)', '\\x\(tokens[3].hexString)', 'Unregistered', 3, 1700000000456)
                    """
            )

            try await store.migrate()
            #expect(try await store.schemaVersions() == Array(1...18))
            #expect(try await store.tokenFailureRowCount(campaign: campaign.id) == 5, "the rows recorded before the upgrade")
            var read = try await store.tokenFailures(campaign: campaign.id)
            #expect(read.map(\.token) == tokens[0..<4].sorted { $0.precedesInByteOrder($1) })
            func verdict(_ token: DeviceToken) -> (RejectionReason, Int, Int64?)? {
                read.first { $0.token == token }.map { ($0.reason, $0.shard, $0.apnsTimestampMilliseconds) }
            }
            #expect(verdict(tokens[0])! == (.badDeviceToken, 0, nil))
            #expect(verdict(tokens[1])! == (.unregistered, 0, 1_700_000_000_123), "the first verdict")
            #expect(verdict(tokens[2])! == (.badDeviceToken, 1, nil))
            #expect(verdict(tokens[3])! == (.unregistered, 3, 1_700_000_000_456))

            // Recorded after the upgrade, in a batch: a token seen before is still read once.
            let update = ProgressUpdate(
                campaign: campaign.id, accepted: 0, rejected: ["BadDeviceToken": 2], resent: 0, doneShards: 0,
                rejections: tokens[4..<6].map { AppliedRejection(token: $0, reason: .badDeviceToken, shard: 0) }
                    + [AppliedRejection(token: tokens[0], reason: .unregistered, shard: 0)],
                lastEventID: "1700000000000-2"
            )
            #expect(try await store.apply(update))
            #expect(try await store.tokenFailureRowCount(campaign: campaign.id) == 8)
            read = try await store.tokenFailures(campaign: campaign.id)
            #expect(Set(read.map(\.token)) == Set(tokens))
            #expect(read.count == 6)
            #expect(verdict(tokens[0])?.0 == .badDeviceToken, "the first verdict, from before the upgrade")
        } catch {
            running.cancel()
            throw error
        }
        running.cancel()
        try await Task.sleep(for: .milliseconds(200))  // the pool's connections close with its run
        try await PostgresFixture.withStore { store in try await store.execute(testSQL: "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") }
    }
}
