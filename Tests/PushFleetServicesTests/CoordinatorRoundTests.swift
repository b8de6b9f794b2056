import Foundation
import Logging
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetTestSupport
import Synchronization
import Testing

@testable import PushFleetServices

/// The coordinator's round, one decision per test, against the in-memory Redis and Postgres of
/// `PushFleetTestSupport` and a clock the test moves: what each campaign's Postgres row and Redis
/// keys hold after it.
@Suite struct CoordinatorRoundTests {
    /// A clock moved by hand: the round's, and the store's `now()`.
    final class Clock: Sendable {
        private let instant = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
        var now: Date { self.instant.withLock { $0 } }
        func advance(by seconds: TimeInterval) { self.instant.withLock { $0 += seconds } }
    }

    /// A round over an empty in-memory queue and store.
    final class Fixture {
        let clock: Clock
        let queue: InMemoryCoordinatorQueue
        let store: InMemoryCoordinatorStore
        let round: CoordinatorRound
        private var added = 0

        init(eventsPerRound: Int = 20_000, outageResumeDelay: Duration = .seconds(30), outageResumeMaximum: Duration = .seconds(600)) {
            let clock = Clock()
            let (queue, store) = (InMemoryCoordinatorQueue(), InMemoryCoordinatorStore(clock: { clock.now }))
            let configuration = CoordinatorService.Configuration(
                eventsPerRound: eventsPerRound, outageResumeDelay: outageResumeDelay, outageResumeMaximum: outageResumeMaximum,
                clock: { clock.now }
            )
            self.clock = clock
            self.queue = queue
            self.store = store
            self.round = CoordinatorRound(
                configuration: configuration, queue: queue, store: store,
                logger: Logger(label: "CoordinatorRoundTests", factory: { _ in SwiftLogNoOpLogHandler() })
            )
        }

        /// Adds a campaign to the store, created after those added before it, and returns it.
        @discardableResult
        func add(_ state: CampaignState, total: Int = 10, shards: Int = 2, _ change: (inout CampaignRecord) -> Void = { _ in }) -> CampaignRecord {
            self.added += 1
            var record = CampaignRecord(
                id: UUID(), topic: "com.example.app", environment: .production, state: state, total: total, shardCount: shards,
                createdAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(self.added))
            )
            change(&record)
            self.store.add(record)
            return record
        }

        /// Publishes the campaign in the queue with its counters so far, in its active set.
        func publish(_ campaign: CampaignRecord, status: CampaignQueueStatus = .running, counters: CampaignCounters) async throws {
            self.queue.setPublished(campaign.id, status: status)
            self.queue.setSnapshot(campaign.id, counters: counters)
            try await self.queue.ensureActive(campaign: campaign.id, topic: campaign.topic, environment: campaign.environment, kind: campaign.kind)
        }

        /// One round. - Returns: whether it was behind, and the campaigns it asked to rebuild.
        func run() async throws -> (behind: Bool, rebuilt: [UUID]) {
            var rebuilt: [UUID] = []
            let behind = try await self.round.run { rebuilt.append($0.id) }
            return (behind, rebuilt)
        }
    }

    private static func rejection(_ index: Int, _ reason: RejectionReason, at milliseconds: Int64? = nil) -> Rejection {
        Rejection(token: TestTokens.token(index), reason: reason, timestampMilliseconds: milliseconds)
    }

    // MARK: - Completing

    @Test func aCampaignWhoseCountsReachItsTotalCompletesAndItsKeysAreRemoved() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.running, total: 10, shards: 2)
        let counters = CampaignCounters(accepted: 8, rejected: ["BadDeviceToken": 2], doneShards: 2)
        try await fixture.publish(campaign, counters: counters)
        fixture.queue.setSnapshot(campaign.id, counters: counters, cursors: [0: 5, 1: 5])
        let ids = fixture.queue.addEvents(
            campaign.id,
            [.rejected([Self.rejection(0, .badDeviceToken), Self.rejection(1, .badDeviceToken)], shard: 0), .shardDone(shard: 0), .shardDone(shard: 1)]
        )

        let (behind, rebuilt) = try await fixture.run()

        #expect(!behind)
        #expect(rebuilt.isEmpty)
        let row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .completed)
        #expect(row.record.finishedAt == fixture.clock.now)
        #expect(row.record.accepted == 8)
        #expect(row.record.rejected == ["BadDeviceToken": 2])
        #expect(row.record.doneShards == 2)
        #expect(row.record.lastEventID == ids[2])
        #expect(row.cursors == [0: 5, 1: 5])
        #expect(row.doneShardIDs == [0, 1])
        #expect(row.queueRemoved)
        #expect(fixture.queue.record(campaign.id) == nil, "every key of the campaign is deleted")
        #expect(!fixture.queue.isActive(campaign.id))
    }

    @Test func aCampaignWithMoreEventsThanARoundTakesIsBehindAndCompletesOnALaterRound() async throws {
        let fixture = Fixture(eventsPerRound: 2)
        let campaign = fixture.add(.running, total: 4, shards: 2)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 2, rejected: ["Unregistered": 2], doneShards: 2))
        let ids = fixture.queue.addEvents(
            campaign.id,
            [.rejected([Self.rejection(0, .unregistered), Self.rejection(1, .unregistered)], shard: 0), .shardDone(shard: 0), .shardDone(shard: 1)]
        )

        let first = try await fixture.run()

        #expect(first.behind, "one event is left beyond the round's two")
        var row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .running, "counters reach the total, but not every event is applied")
        #expect(row.record.lastEventID == ids[1])
        #expect(row.tokenFailures.count == 2)
        #expect(row.doneShardIDs == [0])
        #expect(fixture.queue.record(campaign.id)?.events.map(\.id) == [ids[2]], "the applied events are trimmed")

        let second = try await fixture.run()

        #expect(!second.behind)
        row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .completed)
        #expect(row.record.lastEventID == ids[2])
        #expect(row.doneShardIDs == [0, 1])
        #expect(row.queueRemoved)
        #expect(fixture.queue.record(campaign.id) == nil)
    }

    // MARK: - Pausing and resuming

    @Test func anOutagePauseRequestPausesTheCampaignWithAnAutomaticResume() async throws {
        let fixture = Fixture(outageResumeDelay: .seconds(30))
        let campaign = fixture.add(.running)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 3))
        #expect(fixture.queue.requestPause(campaign: campaign.id, reason: "ServiceUnavailable (HTTP 503)", outage: true))

        _ = try await fixture.run()

        let row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .paused)
        #expect(row.record.stateReason == "ServiceUnavailable (HTTP 503)")
        #expect(row.record.autoResumeAt == fixture.clock.now.addingTimeInterval(30))
        #expect(row.outagePauses == 1)
        let keys = try #require(fixture.queue.record(campaign.id))
        #expect(keys.pauseRequest == nil, "the request is recorded, and cleared")
        #expect(keys.status == .paused)
    }

    @Test func eachFurtherOutagePauseWaitsTwiceAsLongUpToTheMaximum() async throws {
        let fixture = Fixture(outageResumeDelay: .seconds(30), outageResumeMaximum: .seconds(50))
        let campaign = fixture.add(.running)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 3))
        fixture.queue.requestPause(campaign: campaign.id, reason: "InternalServerError (HTTP 500)", outage: true)
        _ = try await fixture.run()
        fixture.clock.advance(by: 30)
        _ = try await fixture.run()
        #expect(fixture.store.record(campaign.id)?.state == .running)

        fixture.queue.requestPause(campaign: campaign.id, reason: "InternalServerError (HTTP 500)", outage: true)
        _ = try await fixture.run()

        let record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .paused)
        #expect(record.autoResumeAt == fixture.clock.now.addingTimeInterval(50), "60 seconds, cut to the maximum")
    }

    @Test func aProviderPauseRequestPausesTheCampaignUntilAnOperatorResumesIt() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.running)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 3))
        fixture.queue.requestPause(campaign: campaign.id, reason: "InvalidProviderToken (HTTP 403)", outage: false)

        _ = try await fixture.run()

        var record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .paused)
        #expect(record.stateReason == "InvalidProviderToken (HTTP 403)")
        #expect(record.autoResumeAt == nil)
        #expect(fixture.queue.record(campaign.id)?.pauseRequest == nil)
        #expect(fixture.queue.record(campaign.id)?.status == .paused)

        fixture.clock.advance(by: 86_400)
        _ = try await fixture.run()

        record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .paused, "a day later, still waiting for an operator")
        #expect(fixture.queue.record(campaign.id)?.status == .paused)
    }

    @Test func aCampaignPausedForAnOutageRunsAgainOnceItsResumeTimeHasPassed() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.paused) {
            $0.stateReason = "ServiceUnavailable (HTTP 503)"
            $0.autoResumeAt = Date(timeIntervalSince1970: 1_800_000_030)
        }
        try await fixture.publish(campaign, status: .paused, counters: CampaignCounters(accepted: 3))

        fixture.clock.advance(by: 29)
        _ = try await fixture.run()
        #expect(fixture.store.record(campaign.id)?.state == .paused, "not before its time")
        #expect(fixture.queue.record(campaign.id)?.status == .paused)

        fixture.clock.advance(by: 2)
        _ = try await fixture.run()

        let record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .running)
        #expect(record.autoResumeAt == nil)
        #expect(record.stateReason == nil)
        #expect(fixture.queue.record(campaign.id)?.status == .running, "Redis is told")
        #expect(fixture.queue.isActive(campaign.id))
    }

    // MARK: - Dead shards

    @Test func deadShardsWithEveryOtherShardDoneFailTheCampaignNamingThem() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.running, total: 30, shards: 3)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 20, doneShards: 2))
        fixture.queue.setDeadShards(campaign.id, [2])

        _ = try await fixture.run()

        let record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .failed)
        #expect(record.stateReason == "1 shard given up after 5 claims without progress (2)")
        #expect(record.deadShards == [2])
        #expect(record.finishedAt == fixture.clock.now)
        #expect(record.accepted == 20, "folded before failing")
    }

    @Test func aShardWhoseLeaseExpiresForTheLastAllowedTimeDiesAndFailsTheCampaign() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.running, total: 30, shards: 3)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 20, doneShards: 2))
        for round in 1...4 {
            fixture.queue.setLeases(campaign.id, [2], expired: [2])
            _ = try await fixture.run()
            #expect(fixture.queue.record(campaign.id)?.pending.first == 2, "round \(round): back to pending")
            #expect(fixture.store.record(campaign.id)?.state == .running)
        }
        fixture.queue.setLeases(campaign.id, [2], expired: [2])

        _ = try await fixture.run()

        #expect(fixture.queue.record(campaign.id)?.deadShards == [2], "its fifth holder lost")
        let record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .failed)
        #expect(record.deadShards == [2])
    }

    @Test func deadShardsWithOtherShardsStillRunningAreOnlyRecorded() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.running, total: 30, shards: 3)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 5))
        fixture.queue.setDeadShards(campaign.id, [2])

        _ = try await fixture.run()

        let record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .running)
        #expect(record.stateReason == nil)
        #expect(record.deadShards == [2])
        #expect(fixture.queue.record(campaign.id)?.status == .running)
    }

    // MARK: - Cancelling

    @Test func aCancelledCampaignWaitsWhileAWorkerHoldsALease() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.cancelled, total: 10) { $0.accepted = 4 }
        try await fixture.publish(campaign, status: .cancelled, counters: CampaignCounters(accepted: 5))
        fixture.queue.setLeases(campaign.id, [1])

        _ = try await fixture.run()

        let row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .cancelled)
        #expect(row.record.cancelled == 0, "the holder may still checkpoint")
        #expect(row.record.accepted == 5, "folded meanwhile")
        #expect(!row.queueRemoved)
        #expect(fixture.queue.record(campaign.id)?.status == .cancelled)
    }

    @Test func aCancelledCampaignWithoutLeasesCountsTheUnsentAsCancelledAndRemovesItsKeys() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.cancelled, total: 10) { $0.accepted = 4 }
        try await fixture.publish(campaign, status: .cancelled, counters: CampaignCounters(accepted: 5, rejected: ["Unregistered": 1]))

        _ = try await fixture.run()

        let row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .cancelled)
        #expect(row.record.accepted == 5)
        #expect(row.record.cancelled == 4)
        #expect(row.record.pending == 0)
        #expect(row.queueRemoved)
        #expect(fixture.queue.record(campaign.id) == nil)
        #expect(!fixture.queue.isActive(campaign.id))
    }

    // MARK: - Starting

    @Test func aScheduledCampaignStartsAtItsTimeAndNotBefore() async throws {
        let fixture = Fixture()
        let startsAt = fixture.clock.now.addingTimeInterval(60)
        let campaign = fixture.add(.scheduled) { $0.startsAt = startsAt }
        fixture.queue.setPublished(campaign.id, status: .scheduled)

        fixture.clock.advance(by: 59)
        _ = try await fixture.run()
        #expect(fixture.store.record(campaign.id)?.state == .scheduled)
        #expect(fixture.store.record(campaign.id)?.startedAt == nil)
        #expect(fixture.queue.record(campaign.id)?.status == .scheduled)

        fixture.clock.advance(by: 1)
        _ = try await fixture.run()

        let record = try #require(fixture.store.record(campaign.id))
        #expect(record.state == .running)
        #expect(record.startedAt == startsAt)
        #expect(fixture.queue.record(campaign.id)?.status == .running)
        #expect(fixture.queue.isActive(campaign.id), "where workers claim it")
    }

    @Test func aPendingCampaignItsLaunchPublishedIsAdopted() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.pending)
        fixture.queue.setPublished(campaign.id, status: .running, launch: "launch-1")

        _ = try await fixture.run()

        let row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .running)
        #expect(row.record.startedAt == fixture.clock.now)
        #expect(row.launch == "launch-1", "its stored shards are the publishing launch's")
    }

    @Test func aPendingCampaignPublishedForALaterStartIsAdoptedAsScheduled() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.pending) { $0.startsAt = Date(timeIntervalSince1970: 1_800_000_060) }
        fixture.queue.setPublished(campaign.id, status: .scheduled, launch: "launch-1")

        _ = try await fixture.run()

        #expect(fixture.store.record(campaign.id)?.state == .scheduled)
        #expect(fixture.store.record(campaign.id)?.startedAt == nil)
    }

    @Test func aPendingCampaignNotPublishedIsLeftPending() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.pending)

        _ = try await fixture.run()

        let row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.state == .pending)
        #expect(row.launch == nil)
        #expect(fixture.queue.record(campaign.id) == nil)
    }

    // MARK: - A queue Redis lost

    @Test func aSnapshotNotNewerThanTheFoldedOneMakesTheRoundForgetTheQueueAndRebuildIt() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.running) {
            $0.accepted = 4
            $0.foldSequence = 10
        }
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 7))
        // An old copy: its next snapshot is numbered 6.
        fixture.queue.setSnapshot(campaign.id, counters: CampaignCounters(accepted: 7), fold: 5)
        fixture.queue.addEvents(campaign.id, [.shardDone(shard: 0)])

        let (_, rebuilt) = try await fixture.run()

        #expect(rebuilt == [campaign.id])
        #expect(fixture.queue.record(campaign.id) == nil, "the old copy's keys are deleted")
        #expect(fixture.queue.isActive(campaign.id), "its active-set entry stays for the rebuilt queue")
        let row = try #require(fixture.store.row(campaign.id))
        #expect(row.record.accepted == 4, "nothing of the old copy is folded")
        #expect(row.record.foldSequence == 10)
        #expect(row.doneShardIDs.isEmpty)
    }

    @Test func aRunningOrPausedCampaignWithoutASnapshotIsRebuilt() async throws {
        let fixture = Fixture()
        let running = fixture.add(.running) { $0.accepted = 4 }
        let paused = fixture.add(.paused)
        let cancelled = fixture.add(.cancelled)

        let (_, rebuilt) = try await fixture.run()

        #expect(rebuilt == [running.id, paused.id], "a cancelled campaign is settled from what Postgres holds instead")
        #expect(fixture.store.record(running.id)?.state == .running)
        #expect(fixture.store.record(running.id)?.accepted == 4)
        #expect(fixture.store.record(cancelled.id)?.cancelled == 10)
    }

    // MARK: - Campaigns served on their own

    /// Two running campaigns whose counts reach their totals: the next round completes both.
    private static func twoCampaignsReadyToComplete(_ fixture: Fixture) async throws -> (first: CampaignRecord, second: CampaignRecord) {
        let (first, second) = (fixture.add(.running), fixture.add(.running))
        for campaign in [first, second] {
            try await fixture.publish(campaign, counters: CampaignCounters(accepted: 10, doneShards: 2))
        }
        return (first, second)
    }

    @Test func aCampaignWhoseRedisCallsThrowDoesNotStopTheOthers() async throws {
        let fixture = Fixture()
        let (failing, other) = try await Self.twoCampaignsReadyToComplete(fixture)
        fixture.queue.failNext("snapshot", campaign: failing.id)

        _ = try await fixture.run()

        #expect(fixture.store.record(failing.id)?.state == .running)
        #expect(fixture.queue.record(failing.id) != nil)
        #expect(fixture.store.record(other.id)?.state == .completed)
        #expect(fixture.queue.record(other.id) == nil)

        _ = try await fixture.run()
        #expect(fixture.store.record(failing.id)?.state == .completed, "tried again next round")
    }

    @Test func aCampaignWhosePostgresWritesThrowDoesNotStopTheOthers() async throws {
        let fixture = Fixture()
        let (failing, other) = try await Self.twoCampaignsReadyToComplete(fixture)
        fixture.store.failNext("apply", campaign: failing.id)

        _ = try await fixture.run()

        #expect(fixture.store.record(failing.id)?.accepted == 0, "nothing of it was folded")
        #expect(fixture.store.record(failing.id)?.state == .running)
        #expect(fixture.store.record(other.id)?.state == .completed)

        _ = try await fixture.run()
        #expect(fixture.store.record(failing.id)?.state == .completed, "tried again next round")
    }

    // MARK: - Folding

    @Test func rejectionsFromEventsReachTheStoreWithTheirReasonAndShard() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.running, total: 40, shards: 4)
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 5, rejected: ["BadDeviceToken": 1, "Unregistered": 2]))
        fixture.queue.addEvents(
            campaign.id,
            [
                .rejected([Self.rejection(0, .badDeviceToken), Self.rejection(1, .unregistered, at: 1_700_000_000_123)], shard: 3),
                .rejected([Self.rejection(2, .unregistered)], shard: 1),
            ]
        )

        _ = try await fixture.run()

        let row = try #require(fixture.store.row(campaign.id))
        #expect(
            row.tokenFailures == [
                AppliedRejection(token: TestTokens.token(0), reason: .badDeviceToken, shard: 3),
                AppliedRejection(token: TestTokens.token(1), reason: .unregistered, shard: 3, apnsTimestampMilliseconds: 1_700_000_000_123),
                AppliedRejection(token: TestTokens.token(2), reason: .unregistered, shard: 1),
            ]
        )
        #expect(row.record.rejected == ["BadDeviceToken": 1, "Unregistered": 2])
        #expect(row.record.state == .running)
    }

    // MARK: - Cleanup and backlog

    @Test func aFinishedCampaignWhoseKeysAreLeftIsCleanedUp() async throws {
        let fixture = Fixture()
        let campaign = fixture.add(.completed) { $0.accepted = 10 }
        try await fixture.publish(campaign, counters: CampaignCounters(accepted: 10, doneShards: 2))

        _ = try await fixture.run()

        #expect(fixture.queue.record(campaign.id) == nil)
        #expect(!fixture.queue.isActive(campaign.id))
        #expect(fixture.store.row(campaign.id)?.queueRemoved == true)
    }

    @Test func theBacklogCountsTheUnfinishedShardsOfRunningCampaignsByTopic() async throws {
        let fixture = Fixture()
        for (state, shards, done) in [(CampaignState.running, 4, 1), (.running, 2, 0), (.paused, 3, 0)] {
            let campaign = fixture.add(state, total: shards * 10, shards: shards) { $0.doneShards = done }
            try await fixture.publish(campaign, status: CampaignQueueStatus(state), counters: CampaignCounters(accepted: done * 10, doneShards: done))
        }

        _ = try await fixture.run()

        #expect(fixture.queue.backlogs == [BacklogKey(topic: "com.example.app", environment: .production): 5])
    }
}
