import Foundation
import Logging
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
@testable import PushFleetServices
import PushFleetTestSupport
import Testing

/// Redis losing a campaign's queue (`FLUSHALL`, a restart without persistence, an old copy brought
/// back), with `CoordinatorService.round()` in-process and shards worked by hand. Every key of the
/// campaign is deleted, as `FLUSHALL` would, but only this campaign's: the other suites' campaigns
/// share the Redis.
extension PipelineTests {
    @Suite struct CoordinatorRebuildTests {
        /// Five shards of two. Before the last fold: shard 0 done, shard 1 half done (one rejection)
        /// with one more token handed to a sender. After it, shard 2 is worked in full and never
        /// folded. Then Redis loses everything of the campaign. The next round rebuilds the queue
        /// from Postgres; shards 1 to 4 are pending again, shard 1 resuming at its cursor; the old
        /// leases are worthless; the campaign completes with every token counted once, and the
        /// token in flight at the fold counted as re-sent.
        @Test func aQueueRedisLostIsRebuiltAndEveryTokenIsCountedOnce() async throws {
            try await CoordinatorHarness.run { h in
                let c = try await h.launch(tokens: 10)
                #expect(try await h.finishNextShard(of: c) != nil)
                let half = try #require(try await h.queue.claim(campaign: c, worker: "before", leaseMilliseconds: 30_000))
                let tokens = try #require(try await h.queue.read(half, from: 0, count: 2)?.tokens)
                let rejection = Rejection(token: tokens[0], reason: .badDeviceToken)
                #expect(try await h.queue.checkpoint(half, CheckpointDelta(sequence: 1, cursor: 1, rejections: [rejection]), leaseMilliseconds: 30_000) == .ok(.running))
                try await h.coordinator.round()
                var record = try #require(try await h.store.campaign(c))
                #expect((record.accepted, record.rejected, record.doneShards) == (2, ["BadDeviceToken": 1], 1))

                let unfolded = try #require(try await h.queue.claim(campaign: c, worker: "before", leaseMilliseconds: 30_000))
                #expect(unfolded.shard == 2)
                #expect(try await h.queue.checkpoint(unfolded, CheckpointDelta(sequence: 1, cursor: 2, accepted: 2), leaseMilliseconds: 30_000) == .ok(.running))
                try await h.loseQueue(of: c)

                try await h.coordinator.round()
                #expect(try await h.queue.activeCampaigns(topic: h.topic, environment: h.environment).contains(c))
                #expect(try await h.queue.descriptor(campaign: c)?.status == .running)
                #expect(try await h.queue.pendingCount(campaign: c) == 4)
                #expect(try await h.queue.checkpoint(half, CheckpointDelta(sequence: 2, cursor: 2, accepted: 1), leaseMilliseconds: 30_000) == .leaseLost)
                let resumed = try #require(try await h.queue.claim(campaign: c, worker: "after", leaseMilliseconds: 30_000))
                #expect((resumed.shard, resumed.cursor, resumed.tokenCount) == (1, 1, 2))
                #expect(resumed.fence > QueueRestoration.fenceBase(generation: 1), "the rebuilt queue's fences are above the lost one's")
                #expect(try await h.queue.read(resumed, from: 1, count: 1)?.tokens == [tokens[1]], "the shard's list is rebuilt in its order")
                #expect(try await h.queue.release(resumed, cursor: 1, countAttempt: false))

                record = try await h.finishEveryShardAndFold(of: c)
                #expect(record.state == .completed)
                #expect((record.accepted, record.rejected, record.pending, record.doneShards) == (9, ["BadDeviceToken": 1], 0, 5))
                #expect(record.resent == 1, "the token handed out past shard 1's cursor at the last fold")
                #expect(try await h.keys(c) == [h.removedMark(c)])
            }
        }

        /// A run of the lost queue handed out more after the last fold than the fold saw in flight.
        /// The rebuild counts what the fold saw; the worker's report of its run, once the queue is
        /// rebuilt, counts the rest, once, however often or by whomever it is reported. A report
        /// before the rebuild waits; a run of the rebuilt queue, or of a finished shard, counts nothing.
        @Test func aRunOfTheLostQueueCountsWhatItHandedOutAfterTheFold() async throws {
            try await CoordinatorHarness.run { h in
                let c = try await h.launch(tokens: 6)
                let done = try #require(try await h.queue.claim(campaign: c, worker: "before", leaseMilliseconds: 30_000))
                _ = try #require(try await h.queue.read(done, from: 0, count: 2)?.tokens)
                #expect(try await h.queue.checkpoint(done, CheckpointDelta(sequence: 1, cursor: 2, accepted: 2), leaseMilliseconds: 30_000) == .ok(.running))
                #expect(try await h.queue.complete(done))
                let lost = try #require(try await h.queue.claim(campaign: c, worker: "before", leaseMilliseconds: 30_000))
                #expect(try await h.queue.read(lost, from: 0, count: 1)?.tokens.count == 1)
                try await h.coordinator.round()
                #expect(try await h.store.recoveryPoint(c)?.sentMarks[lost.shard] == 1, "the fold keeps the shard's sent mark")
                #expect(try await h.queue.read(lost, from: 1, count: 1)?.tokens.count == 1, "handed out after the fold")
                try await h.loseQueue(of: c)

                #expect(try await h.queue.countLostRun(lost, reached: 2) == .queueMissing)
                try await h.coordinator.round()
                #expect(try await h.store.campaign(c)?.resent == 1, "the rebuild counts the token in flight at the fold")
                #expect(try await h.queue.countLostRun(lost, reached: 2) == .counted(1))
                #expect(try await h.queue.countLostRun(lost, reached: 2) == .counted(0), "a report repeated counts nothing more")
                #expect(try await h.queue.countLostRun(done, reached: 2) == .counted(0), "a shard finished before the loss is not sent again")
                let fresh = try #require(try await h.queue.claim(campaign: c, worker: "after", leaseMilliseconds: 30_000))
                #expect(try await h.queue.countLostRun(fresh, reached: 2) == .sameQueue)
                #expect(try await h.queue.release(fresh, cursor: 0, countAttempt: false))

                let record = try await h.finishEveryShardAndFold(of: c)
                #expect(record.state == .completed)
                #expect((record.accepted, record.pending, record.resent) == (6, 0, 2))
            }
        }

        /// A worker's ended runs (``EndedRuns``, against the real queue): one that ended before
        /// the queue was lost is kept until Postgres holds a snapshot taken after it, then
        /// forgotten; one that completed its shard after the last fold waits while the queue is
        /// missing, and once it is rebuilt its whole shard, sent again, is counted as resent.
        @Test func aWorkersEndedRunsAreForgottenOnceFoldedAndCountedIfTheirQueueIsLost() async throws {
            try await CoordinatorHarness.run { h in
                let runs = EndedRuns()
                let logger = Logger(label: "pushfleet.test.ended-runs")
                var clock = ContinuousClock.now
                func report() async {
                    clock = clock + .seconds(1)
                    await runs.reportDue(to: h.queue, logger: logger, now: clock)
                }
                let c = try await h.launch(tokens: 6)
                let first = try #require(try await h.finishNextShard(of: c, reading: true))
                runs.record(first, reached: 2)
                await report()
                await report()
                #expect(runs.count == 1, "kept: no snapshot taken after it is in Postgres yet")
                try await h.coordinator.round()
                let state = try #require(try await h.queue.foldState(campaign: c))
                #expect(state.folded == state.fold, "the coordinator marks the snapshot it folded")
                await report()
                #expect(runs.count == 0, "a snapshot taken after the first report is in Postgres")

                let second = try #require(try await h.finishNextShard(of: c, reading: true))
                runs.record(second, reached: 2)
                await report()
                try await h.loseQueue(of: c)
                await report()
                #expect(runs.count == 1, "kept while the queue is missing")
                try await h.coordinator.round()
                await report()
                #expect(runs.count == 0)
                try await h.coordinator.round()
                #expect(try await h.store.campaign(c)?.resent == 2, "the completed shard goes out again and is counted")

                let record = try await h.finishEveryShardAndFold(of: c)
                #expect(record.state == .completed)
                #expect((record.accepted, record.pending, record.resent) == (6, 0, 2))
            }
        }

        /// Redis brought back from an old copy (a stale RDB file, a replica behind its primary):
        /// the queue exists but holds fewer outcomes than Postgres has folded. The coordinator
        /// deletes it and rebuilds it; shards finished since the copy are not sent again.
        @Test func anOlderCopyOfTheQueueIsReplacedByARebuild() async throws {
            try await CoordinatorHarness.run { h in
                let c = try await h.launch(tokens: 6)
                let copy = try await h.dump(c)
                #expect(try await h.finishNextShard(of: c) != nil)
                try await h.coordinator.round()
                #expect(try await h.store.campaign(c)?.accepted == 2)

                try await h.loseQueue(of: c)
                try await h.restore(copy)
                #expect(try await h.queue.pendingCount(campaign: c) == 3, "the old copy has every shard pending")
                try await h.coordinator.round()
                #expect(try await h.queue.pendingCount(campaign: c) == 2)
                let record = try await h.finishEveryShardAndFold(of: c)
                #expect(record.state == .completed)
                #expect((record.accepted, record.pending) == (6, 0))
            }
        }

        /// A paused campaign is rebuilt paused: no work is handed out until it is resumed.
        @Test func aPausedCampaignIsRebuiltPaused() async throws {
            try await CoordinatorHarness.run { h in
                let c = try await h.launch(tokens: 4)
                #expect(try await h.store.setState(c, to: .paused, from: [.running]))
                try await h.coordinator.round()
                try await h.loseQueue(of: c)
                try await h.coordinator.round()
                #expect(try await h.queue.descriptor(campaign: c)?.status == .paused)
                #expect(try await h.queue.claim(campaign: c, worker: "w", leaseMilliseconds: 1_000) == nil)
                #expect(try await h.store.setState(c, to: .running, from: [.paused]))
                try await h.coordinator.round()
                try await h.finishEveryShard(of: c)
                try await h.coordinator.round()
                #expect(try await h.store.campaign(c)?.state == .completed)
            }
        }

        /// Without its stored audience the queue cannot be rebuilt: the campaign fails with the
        /// reason instead of staying `running` forever.
        @Test func aLostQueueWhoseAudienceIsNotStoredFailsTheCampaign() async throws {
            try await CoordinatorHarness.run { h in
                let c = try await h.launch(tokens: 4)
                let launch = try #require(try await h.queue.launchID(campaign: c))
                try await h.store.discardShardTokens(campaign: c, launch: launch)
                try await h.loseQueue(of: c)
                try await h.coordinator.round()
                let record = try #require(try await h.store.campaign(c))
                #expect(record.state == .failed)
                #expect(record.stateReason?.contains("Redis lost the campaign's queue") == true, "\(record.stateReason ?? "no reason")")
                #expect(try await h.queue.descriptor(campaign: c) == nil)
            }
        }

        /// A cancelled campaign whose queue Redis lost is settled from what Postgres folded: the
        /// outcomes counted stay, the rest is cancelled.
        @Test func aCancelledCampaignWhoseQueueRedisLostIsSettled() async throws {
            try await CoordinatorHarness.run { h in
                let c = try await h.launch(tokens: 6)
                #expect(try await h.finishNextShard(of: c) != nil)
                try await h.coordinator.round()
                #expect(try await h.store.setState(c, to: .cancelled, from: [.running]))
                try await h.loseQueue(of: c)
                try await h.coordinator.round()
                let record = try #require(try await h.store.campaign(c))
                #expect(record.state == .cancelled)
                #expect((record.accepted, record.cancelled, record.pending) == (2, 4, 0))
                // Settled, with the mark that keeps a late rebuild of it from bringing it back.
                #expect(try await h.keys(c) == [h.removedMark(c)])
            }
        }
    }
}

extension CoordinatorHarness {
    /// What `FLUSHALL` does to one campaign: every key gone, and its active-set entry.
    func loseQueue(of id: UUID) async throws {
        for key in try await self.keys(id) { _ = try await self.redis("DEL", key) }
        _ = try await self.redis("SREM", "pf:active:\(self.topic):\(self.environment)", self.key(id))
    }

    /// Every key of the campaign, serialized (`DUMP`).
    func dump(_ id: UUID) async throws -> [(key: String, value: [UInt8])] {
        var copy: [(key: String, value: [UInt8])] = []
        for key in try await self.keys(id).sorted() {
            copy.append((key: key, value: try #require(try await self.redis("DUMP", key).bytes)))
        }
        return copy
    }

    /// Brings back keys `dump` saved, as a restart from an old RDB file would.
    func restore(_ copy: [(key: String, value: [UInt8])]) async throws {
        for (key, value) in copy { #expect(try await self.redis("RESTORE", key, 0, value, "REPLACE").string == "OK") }
    }
}
