import Foundation
import PushFleetCore
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// CampaignQueue on the real Redis: launch, the life of a shard, events, removal.
@Suite struct RedisCampaignQueueTests {
    @Test func aShardFromStagingToCompletion() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        let tokens = try await fixture.launch([3, 2])
        #expect(try await queue.descriptor(campaign: fixture.campaign) == fixture.descriptor(shardCount: 2, totalTokens: 5))
        #expect(try await queue.activeCampaigns(topic: fixture.topic, environment: .sandbox).contains(fixture.campaign))
        #expect(try await queue.pendingCount(campaign: fixture.campaign) == 2)

        let lease = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        #expect(lease == ShardLease(campaign: fixture.campaign, shard: 0, owner: "w1|1", fence: 1, cursor: 0, attempts: 0, tokenCount: 3))
        #expect(try await queue.leaseCount(campaign: fixture.campaign) == 1)
        #expect(try await queue.read(lease, from: 0, count: 2)?.tokens == Array(tokens[0][0..<2]))
        #expect(try await queue.read(lease, from: 2, count: 100)?.tokens == [tokens[0][2]])
        #expect(try await queue.read(lease, from: 3, count: 100)?.tokens == [])

        let rejection = Rejection(token: tokens[0][1], reason: .badDeviceToken, timestampMilliseconds: 1_700_000_000_123)
        let result = try await queue.checkpoint(lease, CheckpointDelta(sequence: 1, cursor: 3, accepted: 2, rejections: [rejection]), leaseMilliseconds: 30_000)
        #expect(result == .ok(.running))
        #expect(try await queue.counters(campaign: fixture.campaign) == CampaignCounters(accepted: 2, rejected: ["BadDeviceToken": 1]))
        let first = try await queue.events(campaign: fixture.campaign, after: "0-0", count: 100)
        #expect(first.map(\.event) == [.rejected([rejection], shard: 0)])

        #expect(try await queue.complete(lease))
        #expect(try await queue.counters(campaign: fixture.campaign).doneShards == 1)
        // The finished shard's cursor stays at its length: the snapshot says which shards the counters finished.
        #expect(try await queue.snapshot(campaign: fixture.campaign) == QueueSnapshot(
            counters: CampaignCounters(accepted: 2, rejected: ["BadDeviceToken": 1], doneShards: 1), cursors: [0: 3], sentMarks: [:], inFlight: 0, fold: 1
        ))
        #expect(try await queue.leaseCount(campaign: fixture.campaign) == 0)
        let after = try await queue.events(campaign: fixture.campaign, after: try #require(first.last).id, count: 100)
        #expect(after.map(\.event) == [.shardDone(shard: 0)])
        let keys = try await fixture.keys()
        #expect(!keys.contains("pf:{\(fixture.id)}:s:0"))
        #expect(keys.contains("pf:{\(fixture.id)}:s:1"))
        try await fixture.shutdown()
    }

    @Test func aRepeatedCheckpointIsCountedOnce() async throws {
        let fixture = try RedisQueueFixture()
        let queue = fixture.queue
        let tokens = try await fixture.launch([10])[0]
        let lease = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        let rejection = Rejection(token: tokens[2], reason: .badDeviceToken)
        let first = CheckpointDelta(sequence: 1, cursor: 4, accepted: 3, rejections: [rejection], resent: 1, retried: 2)
        // The answer to the first call was lost; the worker sends the same checkpoint again.
        #expect(try await queue.checkpoint(lease, first, leaseMilliseconds: 30_000) == .ok(.running))
        #expect(try await queue.checkpoint(lease, first, leaseMilliseconds: 30_000) == .ok(.running))
        let once = CampaignCounters(accepted: 3, rejected: ["BadDeviceToken": 1], resent: 1, retried: 2)
        #expect(try await queue.counters(campaign: fixture.campaign) == once)
        #expect(try await queue.events(campaign: fixture.campaign, after: "0-0", count: 100).count == 1)
        // The next sequence number is new work and counts.
        #expect(try await queue.checkpoint(lease, CheckpointDelta(sequence: 2, cursor: 6, accepted: 2), leaseMilliseconds: 30_000) == .ok(.running))
        #expect(try await queue.counters(campaign: fixture.campaign).accepted == 5)
        // Another holder's sequence 1 is not the first holder's.
        #expect(try await queue.release(lease, cursor: 6, countAttempt: false))
        let second = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000))
        #expect(try await queue.checkpoint(second, CheckpointDelta(sequence: 1, cursor: 10, accepted: 4), leaseMilliseconds: 30_000) == .ok(.running))
        #expect(try await queue.counters(campaign: fixture.campaign).accepted == 9)
        #expect(try await queue.complete(second))
        #expect(!(try await fixture.keys()).contains("pf:{\(fixture.id)}:ckseq"))
        try await fixture.shutdown()
    }

    @Test func publishingTwiceChangesNothing() async throws {
        let fixture = try RedisQueueFixture()
        try await fixture.launch([1, 1, 1])
        let lease = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 30_000))
        try await fixture.queue.setStatus(campaign: fixture.campaign, .paused)
        try await fixture.queue.publish(fixture.descriptor(shardCount: 3, totalTokens: 3))
        #expect(try await fixture.pending() == [1, 2])
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign)?.status == .paused)
        #expect(try await fixture.heartbeat(lease) == .ok(.paused))
        try await fixture.shutdown()
    }

    @Test func stagingKeepsOrderAndBinaryTokensAcrossLargeShards() async throws {
        let fixture = try RedisQueueFixture()
        let odd = try DeviceToken(bytes: [0, 0, 0x0D, 0x0A, 0, 0xFF, 0])  // NULs, CR LF, not 32 bytes
        let big = TestTokens.tokens(2_500, seed: 3) + [odd]
        try await fixture.queue.stageShard(campaign: fixture.campaign, shard: 0, tokens: [TestTokens.token(1)])
        try await fixture.queue.stageShard(campaign: fixture.campaign, shard: 0, tokens: big)  // replaces
        try await fixture.queue.publish(fixture.descriptor(shardCount: 1, totalTokens: big.count))
        let lease = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 30_000))
        #expect(lease.tokenCount == 2_501)
        var read: [DeviceToken] = []
        while let window = try await fixture.queue.read(lease, from: read.count, count: 1_000)?.tokens, !window.isEmpty { read += window }
        #expect(read == big)
        try await fixture.shutdown()
    }

    /// A personalized campaign's entries carry each recipient's packed values, staged by a launch
    /// and published with it, and read back beside their tokens from any index; an entry that is
    /// not one is reported, not misread.
    @Test func aPersonalizedShardReadsBackEachTokensValues() async throws {
        let fixture = try RedisQueueFixture()
        let odd = try DeviceToken(bytes: [0, 0, 0x0D, 0x0A, 0, 0xFF, 0])
        let tokens = TestTokens.tokens(1_500, seed: 5) + [odd]
        let values: [[UInt8]] = tokens.indices.map { index in Array(repeating: UInt8(truncatingIfNeeded: index), count: [1, 2, 200][index % 3]) }
        try await fixture.queue.stageShards(campaign: fixture.campaign, launch: "l1", shards: [(shard: 0, tokens: tokens)], values: [RecipientValueList(values)])
        #expect(try await fixture.queue.publish(fixture.descriptor(shardCount: 1, totalTokens: tokens.count), launch: "l1"))
        let lease = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 30_000))
        #expect(lease.tokenCount == tokens.count)
        var read: (tokens: [DeviceToken], values: [[UInt8]]) = ([], [])
        while let window = try await fixture.queue.read(lease, from: read.tokens.count, count: 400, personalized: true), !window.tokens.isEmpty {
            read.tokens += window.tokens
            read.values += try #require(window.values)
        }
        #expect(read.tokens == tokens)
        #expect(read.values == values)
        // Read as a campaign that is not personalized, the entries are not tokens of their size.
        #expect(try await fixture.queue.read(lease, from: 0, count: 1)?.tokens.first != tokens[0])
        _ = try await fixture.command("RPUSH", "pf:{\(fixture.id)}:s:0", "")
        await #expect(throws: RedisError.self) { try await fixture.queue.read(lease, from: tokens.count, count: 1, personalized: true) }
        try await fixture.shutdown()
    }

    @Test func eventsPageAfterAnIdAndTrimThroughOne() async throws {
        let fixture = try RedisQueueFixture()
        let tokens = try await fixture.launch([5])[0]
        let lease = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 30_000))
        let rejections = tokens.map { Rejection(token: $0, reason: .unregistered) }
        _ = try await fixture.queue.checkpoint(lease, CheckpointDelta(sequence: 1, cursor: 5, rejections: rejections), leaseMilliseconds: 30_000)
        #expect(try await fixture.queue.counters(campaign: fixture.campaign).rejected == ["Unregistered": 5])

        // One entry per checkpoint, holding its rejections in order.
        _ = try await fixture.queue.checkpoint(lease, CheckpointDelta(sequence: 2, cursor: 5), leaseMilliseconds: 30_000)
        _ = try await fixture.queue.checkpoint(
            lease, CheckpointDelta(sequence: 3, cursor: 5, rejections: [rejections[0]]), leaseMilliseconds: 30_000
        )
        _ = try await fixture.queue.checkpoint(
            lease, CheckpointDelta(sequence: 4, cursor: 5, rejections: [rejections[1], rejections[2]]), leaseMilliseconds: 30_000
        )
        #expect(try await fixture.queue.counters(campaign: fixture.campaign).rejected == ["Unregistered": 8])
        let expected: [QueueEvent] = [
            .rejected(rejections, shard: 0), .rejected([rejections[0]], shard: 0), .rejected([rejections[1], rejections[2]], shard: 0),
        ]
        let page = try await fixture.queue.events(campaign: fixture.campaign, after: "0-0", count: 2)
        #expect(page.map(\.event) == Array(expected[0..<2]))
        let rest = try await fixture.queue.events(campaign: fixture.campaign, after: page[1].id, count: 100)
        #expect(rest.map(\.event) == Array(expected[2...]))

        try await fixture.queue.trimEvents(campaign: fixture.campaign, through: page[1].id)
        let left = try await fixture.queue.events(campaign: fixture.campaign, after: "0-0", count: 100)
        #expect(left.map(\.id) == rest.map(\.id))
        try await fixture.queue.trimEvents(campaign: fixture.campaign, through: try #require(rest.last).id)
        #expect(try await fixture.queue.events(campaign: fixture.campaign, after: "0-0", count: 100).isEmpty)
        try await fixture.shutdown()
    }

    /// Entries an earlier version wrote (one rejected token each) still read, as a list of one,
    /// beside the packed entries of this version; an entry whose pack is damaged is refused.
    @Test func eventsOfEitherFormatRead() async throws {
        let fixture = try RedisQueueFixture()
        let tokens = try await fixture.launch([3])[0]
        let lease = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 30_000))
        let events = "pf:{\(fixture.id)}:events"
        _ = try await fixture.command("XADD", events, "*", "k", "rejected", "s", "0", "t", tokens[0].bytes, "r", "Unregistered", "ts", "1700000000123")
        let packed = [Rejection(token: tokens[1], reason: .badDeviceToken), Rejection(token: tokens[2], reason: .unregistered)]
        _ = try await fixture.queue.checkpoint(lease, CheckpointDelta(sequence: 1, cursor: 3, rejections: packed), leaseMilliseconds: 30_000)
        #expect(try await fixture.queue.events(campaign: fixture.campaign, after: "0-0", count: 10).map(\.event) == [
            .rejected([Rejection(token: tokens[0], reason: .unregistered, timestampMilliseconds: 1_700_000_000_123)], shard: 0),
            .rejected(packed, shard: 0),
        ])
        _ = try await fixture.command("XADD", events, "*", "k", "rejections", "s", "0", "b", Array(RejectionPack.encode(packed).dropLast()))
        await #expect(throws: RedisError.self) { _ = try await fixture.queue.events(campaign: fixture.campaign, after: "0-0", count: 10) }
        try await fixture.shutdown()
    }

    @Test func removeDeletesEveryKeyAndTheActiveEntry() async throws {
        let fixture = try RedisQueueFixture()
        let tokens = try await fixture.launch([2, 2, 2])
        let done = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 30_000))
        _ = try await fixture.queue.read(done, from: 0, count: 2)
        let rejection = Rejection(token: tokens[0][0], reason: .badDeviceToken)
        _ = try await fixture.queue.checkpoint(done, CheckpointDelta(sequence: 1, cursor: 2, accepted: 1, rejections: [rejection]), leaseMilliseconds: 30_000)
        #expect(try await fixture.queue.complete(done))
        let held = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 150))
        _ = try await fixture.queue.read(held, from: 0, count: 1)
        try await fixture.reap(1, maximumAttempts: 1)  // shard 1 dies; shard 2 stays pending
        #expect(try await fixture.keys().count >= 8)

        try await fixture.queue.remove(campaign: fixture.campaign, topic: fixture.topic, environment: .sandbox)
        // Every key but the mark that the queue was removed, which lasts a week.
        #expect(try await fixture.keys() == ["pf:{\(fixture.id)}:removed"])
        #expect(try await fixture.command("TTL", "pf:{\(fixture.id)}:removed").integer ?? 0 > 6 * 24 * 3600)
        #expect(!(try await fixture.queue.activeCampaigns(topic: fixture.topic, environment: .sandbox).contains(fixture.campaign)))
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign) == nil)
        try await fixture.shutdown()
    }

    /// A rebuild staged by a coordinator that was then frozen past its leadership, continued after
    /// the next leader completed the campaign and removed its queue, puts nothing back: the
    /// restore finds the mark that the queue was removed. The same restore of a queue Redis lost
    /// (no mark) rebuilds it.
    @Test func aRestoreAfterTheQueueWasRemovedPutsNothingBack() async throws {
        let fixture = try RedisQueueFixture()
        let tokens = try await fixture.launch([2, 2])
        let restoration = QueueRestoration(
            descriptor: fixture.descriptor(shardCount: 2, totalTokens: 4), launch: "l1", tokenCounts: [2, 2], cursors: [0, 0],
            sentMarks: [0, 0], deadShards: [], counters: CampaignCounters(), fold: 1, fenceBase: QueueRestoration.fenceBase(generation: 1)
        )
        func stage(_ launch: String) async throws {
            try await fixture.queue.stageShards(campaign: fixture.campaign, launch: launch, shards: tokens.enumerated().map { (shard: $0.offset, tokens: $0.element) })
        }

        try await stage("rebuild-late")
        try await fixture.queue.remove(campaign: fixture.campaign, topic: fixture.topic, environment: .sandbox)
        #expect(try await fixture.queue.restore(restoration, staged: "rebuild-late") == false)
        #expect(try await fixture.keys() == ["pf:{\(fixture.id)}:removed"], "no queue, and the staged lists deleted")
        // A cleanup repeated (a round whose record of it failed) finds no meta hash and deletes what
        // it finds under the campaign's prefix: all but the mark.
        try await fixture.queue.remove(campaign: fixture.campaign, topic: fixture.topic, environment: .sandbox)
        #expect(try await fixture.keys() == ["pf:{\(fixture.id)}:removed"])
        #expect(!(try await fixture.queue.activeCampaigns(topic: fixture.topic, environment: .sandbox).contains(fixture.campaign)))

        // Redis losing everything (the mark too) leaves a queue the restore rebuilds.
        for key in try await fixture.keys() { _ = try await fixture.command("DEL", key) }
        try await stage("rebuild-lost")
        #expect(try await fixture.queue.restore(restoration, staged: "rebuild-lost"))
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign) != nil)
        #expect(try await fixture.queue.activeCampaigns(topic: fixture.topic, environment: .sandbox).contains(fixture.campaign))
        try await fixture.queue.remove(campaign: fixture.campaign, topic: fixture.topic, environment: .sandbox)
        try await fixture.shutdown()
    }

    @Test func discardDeletesAStagedOrPublishedCampaign() async throws {
        let fixture = try RedisQueueFixture()
        let shards = [(shard: 0, tokens: TestTokens.tokens(3)), (shard: 1, tokens: TestTokens.tokens(3))]
        try await fixture.queue.stageShards(campaign: fixture.campaign, shards: shards)
        #expect(try await fixture.keys().count == 2)
        try await fixture.queue.discard(campaign: fixture.campaign, shardCount: 2)
        #expect(try await fixture.keys() == [])

        try await fixture.launch([1, 1])
        try await fixture.queue.discard(campaign: fixture.campaign, shardCount: 2)
        #expect(try await fixture.keys() == [])
        #expect(!(try await fixture.queue.activeCampaigns(topic: fixture.topic, environment: .sandbox).contains(fixture.campaign)))
        try await fixture.shutdown()
    }

    /// Two launches of one id stage under their own keys; the first to publish renames its lists
    /// into place in one step, the second finds the campaign published, and each discards only
    /// its own staged lists.
    @Test func launchesStageApartAndTheFirstToPublishWins() async throws {
        let fixture = try RedisQueueFixture()
        let first = [TestTokens.tokens(3, seed: 1), TestTokens.tokens(2, seed: 1)]
        let second = [TestTokens.tokens(3, seed: 2), TestTokens.tokens(2, seed: 2)]
        try await fixture.queue.stageShards(campaign: fixture.campaign, launch: "a", shards: first.enumerated().map { ($0.offset, $0.element) })
        try await fixture.queue.stageShards(campaign: fixture.campaign, launch: "b", shards: second.enumerated().map { ($0.offset, $0.element) })
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign) == nil, "staging publishes nothing")
        // A staged list expires unless published: a launch killed while staging leaves nothing for long.
        let staged = try #require(try await fixture.command("TTL", "pf:{\(fixture.id)}:stage:a:s:0").integer)
        #expect(staged > 0 && staged <= CampaignQueue.stagedLifetimeSeconds)
        // A launch whose staging is incomplete publishes nothing.
        await #expect(throws: RedisError.self) {
            try await fixture.queue.publish(fixture.descriptor(shardCount: 3, totalTokens: 6), launch: "b")
        }
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign) == nil)

        #expect(try await fixture.queue.publish(fixture.descriptor(shardCount: 2, totalTokens: 5), launch: "a"))
        #expect(try await fixture.queue.publish(fixture.descriptor(shardCount: 2, totalTokens: 5), launch: "b") == false)
        try await fixture.queue.discardStaged(campaign: fixture.campaign, launch: "b", shardCount: 2)
        #expect(try await fixture.keys() == ["pf:{\(fixture.id)}:meta", "pf:{\(fixture.id)}:pending", "pf:{\(fixture.id)}:s:0", "pf:{\(fixture.id)}:s:1"])
        #expect(try await fixture.queue.activeCampaigns(topic: fixture.topic, environment: .sandbox).contains(fixture.campaign))
        #expect(try await fixture.command("TTL", "pf:{\(fixture.id)}:s:0").integer == -1, "a published list does not expire")
        let lease = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w", leaseMilliseconds: 30_000))
        #expect(try await fixture.queue.read(lease, from: 0, count: 10)?.tokens == first[lease.shard])
        try await fixture.queue.discard(campaign: fixture.campaign, shardCount: 2)
        try await fixture.shutdown()
    }

    /// A second launch of one id, slower than the whole campaign: the first published it, the
    /// campaign finished and its queue was removed, and then the second publishes. It publishes
    /// nothing (the campaign would be sent again) and leaves the id out of the active set.
    @Test func aLaunchThatPublishesAfterTheCampaignFinishedPublishesNothing() async throws {
        let fixture = try RedisQueueFixture()
        let tokens = [TestTokens.tokens(3, seed: 3), TestTokens.tokens(2, seed: 3)]
        for launch in ["a", "b"] {
            try await fixture.queue.stageShards(campaign: fixture.campaign, launch: launch, shards: tokens.enumerated().map { ($0.offset, $0.element) })
        }
        let descriptor = fixture.descriptor(shardCount: 2, totalTokens: 5)
        #expect(try await fixture.queue.publish(descriptor, launch: "a"))
        try await fixture.queue.remove(campaign: fixture.campaign, topic: fixture.topic, environment: .sandbox)

        #expect(try await fixture.queue.publish(descriptor, launch: "b") == false)
        try await fixture.queue.discardStaged(campaign: fixture.campaign, launch: "b", shardCount: 2)
        #expect(try await fixture.keys() == ["pf:{\(fixture.id)}:removed"])
        #expect(!(try await fixture.queue.activeCampaigns(topic: fixture.topic, environment: .sandbox).contains(fixture.campaign)))
        try await fixture.shutdown()
    }
}
