import Foundation
import PushFleetCore
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// CampaignQueue leases on the real Redis: fencing, re-send accounting, release, pause, attempts.
/// Leases here last a few hundred milliseconds; the tests wait for them to lapse but assert no timings.
@Suite struct RedisCampaignQueueLeaseTests {
    @Test func aStaleWorkerLearnsItLostTheLeaseAndChangesNothing() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        let tokens = try await fixture.launch([4])[0]
        let stale = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 200))
        try await fixture.reap(1)
        let fresh = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000))
        #expect(fresh.fence == stale.fence + 1)
        #expect(fresh.owner == "w2|\(stale.fence + 1)")
        #expect(fresh.attempts == 1)

        let rejection = Rejection(token: tokens[0], reason: .badDeviceToken)
        let late = try await queue.checkpoint(stale, CheckpointDelta(sequence: 1, cursor: 4, accepted: 3, rejections: [rejection]), leaseMilliseconds: 30_000)
        #expect(late == .leaseLost)
        #expect(try await queue.read(stale, from: 0, count: 4) == nil)
        #expect(try await queue.complete(stale) == false)
        #expect(try await queue.release(stale, cursor: 4, countAttempt: true) == false)

        #expect(try await queue.counters(campaign: fixture.campaign) == CampaignCounters())
        #expect(try await queue.events(campaign: fixture.campaign, after: "0-0", count: 10).isEmpty)
        #expect(try await queue.pendingCount(campaign: fixture.campaign) == 0)
        #expect(try await queue.read(fresh, from: 0, count: 4)?.tokens == tokens)
        #expect(try await queue.checkpoint(fresh, CheckpointDelta(sequence: 1, cursor: 4, accepted: 4), leaseMilliseconds: 30_000) == .ok(.running))
        #expect(try await queue.complete(fresh))
        try await fixture.shutdown()
    }

    @Test func aDeadWorkersUnconfirmedWindowCountsAsResentOnce() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        try await fixture.launch([10])
        let first = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 200))
        _ = try await queue.read(first, from: 0, count: 6)  // sent = 6
        _ = try await queue.checkpoint(first, CheckpointDelta(sequence: 1, cursor: 2, accepted: 2), leaseMilliseconds: 200)
        try await fixture.reap(1)
        let second = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 200))
        #expect(second.cursor == 2)
        #expect(try await queue.counters(campaign: fixture.campaign).resent == 4)
        // The second holder dies before reading anything: nothing more was sent, nothing more is counted.
        try await fixture.reap(1)
        let third = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w3", leaseMilliseconds: 30_000))
        #expect(third.cursor == 2)
        #expect(try await queue.counters(campaign: fixture.campaign).resent == 4)
        // Re-sends a live worker reports itself add up.
        _ = try await queue.checkpoint(third, CheckpointDelta(sequence: 1, cursor: 10, accepted: 8, resent: 3), leaseMilliseconds: 30_000)
        #expect(try await queue.counters(campaign: fixture.campaign) == CampaignCounters(accepted: 10, resent: 7))
        try await fixture.shutdown()
    }

    @Test func releasePutsTheShardFirstWithItsCursor() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        try await fixture.launch([10, 10, 10])
        let lease = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        _ = try await queue.read(lease, from: 0, count: 8)
        _ = try await queue.checkpoint(lease, CheckpointDelta(sequence: 1, cursor: 5, accepted: 5), leaseMilliseconds: 30_000)
        #expect(try await queue.release(lease, cursor: 3, countAttempt: false))  // a lower cursor never lowers it
        #expect(try await fixture.pending() == [0, 1, 2])
        #expect(try await queue.leaseCount(campaign: fixture.campaign) == 0)

        let again = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000))
        #expect(again.shard == 0)
        #expect(again.cursor == 5)
        #expect(again.attempts == 0)
        #expect(try await queue.counters(campaign: fixture.campaign).resent == 0)  // the releaser was alive
        #expect(try await queue.release(again, cursor: 7, countAttempt: true))
        let third = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w3", leaseMilliseconds: 30_000))
        #expect(third.shard == 0)
        #expect(third.cursor == 7)
        #expect(third.attempts == 1)
        try await fixture.shutdown()
    }

    /// What a release leaves as delivered reaches the next holder, and the one after it if the next
    /// gives the shard back with nothing learned; a holder that dies is not charged for delivered
    /// positions it never sent; completion clears them.
    @Test func deliveredPositionsGoFromAReleaseToTheNextHolders() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        try await fixture.launch([10])
        let first = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        #expect(first.delivered.isEmpty)
        _ = try await queue.read(first, from: 0, count: 8)
        _ = try await queue.checkpoint(first, CheckpointDelta(sequence: 1, cursor: 2, accepted: 2), leaseMilliseconds: 30_000)
        #expect(try await queue.release(first, cursor: 2, delivered: [3, 4, 7], countAttempt: false))
        // Were the queue lost now, 2…7 would go out again, 3, 4 and 7 delivered already: the
        // snapshot counts them as handed out.
        let snapshot = try #require(try await queue.snapshot(campaign: fixture.campaign))
        #expect(snapshot.sentMarks == [0: 8])
        #expect(snapshot.inFlight == 6)

        let second = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000))
        #expect(second.cursor == 2)
        #expect(second.delivered == [3, 4, 7])
        // Given back unchanged (it could not send the campaign), the positions stay.
        #expect(try await queue.release(second, cursor: second.cursor, countAttempt: false))
        let third = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w3", leaseMilliseconds: 200))
        #expect(third.delivered == [3, 4, 7])
        // The third reads 2…9, counts 2…5 (3 and 4 among them, unsent) and dies: of 6…9, 7 was not
        // sent again, so 6, 8 and 9 are what may be re-sent.
        _ = try await queue.read(third, from: 2, count: 8)
        _ = try await queue.checkpoint(third, CheckpointDelta(sequence: 1, cursor: 6, accepted: 4), leaseMilliseconds: 200)
        try await fixture.reap(1)
        let fourth = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w4", leaseMilliseconds: 30_000))
        #expect(fourth.cursor == 6)
        #expect(fourth.delivered == [7], "positions below the cursor are no longer handed out")
        #expect(try await queue.counters(campaign: fixture.campaign).resent == 3)
        _ = try await queue.checkpoint(fourth, CheckpointDelta(sequence: 1, cursor: 10, accepted: 4), leaseMilliseconds: 30_000)
        #expect(try await queue.complete(fourth))
        #expect(try await queue.counters(campaign: fixture.campaign) == CampaignCounters(accepted: 10, resent: 3, doneShards: 1))
        #expect(try await fixture.command("HEXISTS", "pf:{\(fixture.id)}:delivered", "0") == .integer(0))
        try await fixture.shutdown()
    }

    @Test func pausedCampaignsHandOutNothingAndTellHolders() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        try await fixture.launch([1, 1])
        let lease = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        try await queue.setStatus(campaign: fixture.campaign, .paused)
        #expect(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000) == nil)
        #expect(try await fixture.heartbeat(lease) == .ok(.paused))
        try await queue.setStatus(campaign: fixture.campaign, .running)
        #expect(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000)?.shard == 1)
        try await queue.setStatus(campaign: fixture.campaign, .cancelled)
        #expect(try await fixture.heartbeat(lease) == .ok(.cancelled))

        let unknown = UUID()
        try await queue.setStatus(campaign: unknown, .paused)  // never creates a campaign
        #expect(try await queue.descriptor(campaign: unknown) == nil)
        #expect(try await queue.claim(campaign: unknown, worker: "w", leaseMilliseconds: 30_000) == nil)
        try await fixture.shutdown()
    }

    @Test func shardsThatKeepLosingHoldersGoToTheDeadList() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        try await fixture.launch([2, 2])
        let first = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 150))
        #expect(first.attempts == 0)
        try await fixture.reap(1, maximumAttempts: 2)
        #expect(try await fixture.pending() == [0, 1])  // back at the front
        let second = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 150))
        #expect(second.shard == 0)
        #expect(second.attempts == 1)
        try await fixture.reap(1, maximumAttempts: 2)
        #expect(try await queue.deadShards(campaign: fixture.campaign) == [0])
        #expect(try await fixture.pending() == [1])
        #expect(try await fixture.heartbeat(second, cursor: 1) == .leaseLost)
        #expect(try await queue.claim(campaign: fixture.campaign, worker: "w3", leaseMilliseconds: 30_000)?.shard == 1)
        #expect(try await queue.claim(campaign: fixture.campaign, worker: "w3", leaseMilliseconds: 30_000) == nil)
        try await fixture.shutdown()
    }
}
