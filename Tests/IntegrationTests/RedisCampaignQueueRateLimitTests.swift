import Foundation
import PushFleetCore
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// The fleet's token bucket of a throttled campaign, in the read script on the real Redis, on an
/// injected clock (milliseconds given to each read): how much a read gets and how long it is told
/// to wait, refilling, the burst cap, a bucket shared by every shard and holder, and changing the
/// limit while it runs. No wall-clock time is asserted.
@Suite struct RedisCampaignQueueRateLimitTests {
    static let start = 1_800_000_000_000

    @Test func anUnthrottledCampaignReadsWholeWindowsAndKeepsNoBucket() async throws {
        let fixture = try RedisQueueFixture()
        let tokens = try await fixture.launch([600])[0]
        let lease = try #require(try await fixture.queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        let window = try #require(try await fixture.queue.read(lease, from: 0, count: 500, clock: Self.start))
        #expect(window == ShardWindow(tokens: Array(tokens[0..<500]), retryAfter: nil))
        #expect(try await !fixture.keys().contains("pf:{\(fixture.id)}:bucket"))
        try await fixture.shutdown()
    }

    @Test func aReadIsGrantedWhatTheBucketHoldsAndToldHowLongToWaitOtherwise() async throws {
        let fixture = try RedisQueueFixture()
        let tokens = try await fixture.launch([1_000])[0]
        try await fixture.queue.setRateLimit(campaign: fixture.campaign, 100)  // bursts of 10, 20 kept at most
        let queue = fixture.queue
        let lease = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        let t = Self.start

        // A new bucket is full: 20 of the 500 asked for, in order.
        #expect(try await queue.read(lease, from: 0, count: 500, clock: t) == ShardWindow(tokens: Array(tokens[0..<20]), retryAfter: nil))
        // Empty: a burst of 10 permits takes 100 ms at 100 a second.
        #expect(try await queue.read(lease, from: 20, count: 500, clock: t)?.retryAfter == .milliseconds(100))
        // Half way there: 50 ms more. A read is granted only once it can have a burst (or its count).
        #expect(try await queue.read(lease, from: 20, count: 500, clock: t + 50)?.retryAfter == .milliseconds(50))
        #expect(try await queue.read(lease, from: 20, count: 500, clock: t + 100)?.tokens == Array(tokens[20..<30]))
        // A smaller window needs only its own count: 3 permits after 30 ms.
        #expect(try await queue.read(lease, from: 30, count: 3, clock: t + 120)?.retryAfter == .milliseconds(10))
        #expect(try await queue.read(lease, from: 30, count: 3, clock: t + 130)?.tokens == Array(tokens[30..<33]))
        // A long pause fills the bucket to two bursts only: no flood of the whole idle time.
        #expect(try await queue.read(lease, from: 33, count: 500, clock: t + 60_000)?.tokens.count == 20)
        #expect(try await queue.read(lease, from: 53, count: 500, clock: t + 60_000)?.retryAfter == .milliseconds(100))
        // Paced reads hand nothing to a sender: `sent` is where the last granted read ended.
        let sent = try await fixture.command("HGET", "pf:{\(fixture.id)}:sent", "\(lease.shard)")
        #expect(sent.string == "53")
        try await fixture.shutdown()
    }

    @Test func overTimeTheFleetGetsTheRateAndNoMore() async throws {
        let fixture = try RedisQueueFixture()
        try await fixture.launch([20_000, 20_000])
        try await fixture.queue.setRateLimit(campaign: fixture.campaign, 1_000)  // bursts of 100, 200 kept at most
        let queue = fixture.queue
        // Two holders of two shards polling at their own pace share one bucket.
        let a = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        let b = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w2", leaseMilliseconds: 30_000))
        var next = [a.shard: 0, b.shard: 0]
        var elapsed = 0
        while elapsed <= 10_000 {
            for (lease, step) in [(a, 7), (b, 13)] where elapsed % step == 0 {
                let window = try #require(try await queue.read(lease, from: next[lease.shard]!, count: 500, clock: Self.start + elapsed))
                next[lease.shard]! += window.tokens.count
            }
            elapsed += 1
        }
        let granted = next.values.reduce(0, +)
        // 10 s at 1,000 a second, and the full bucket at the start: never more; less by at most
        // what is left in the bucket at the end.
        #expect(granted <= 10_000 + 200)
        #expect(granted >= 10_000 - 200)
        #expect(next[a.shard]! > 0 && next[b.shard]! > 0)
        try await fixture.shutdown()
    }

    @Test func theLimitChangesWhileItRunsAndComesWithThePublishedCampaign() async throws {
        let fixture = try RedisQueueFixture()
        var descriptor = fixture.descriptor(shardCount: 1, totalTokens: 100)
        descriptor.definition.rateLimit = 10
        try await fixture.queue.stageShards(campaign: fixture.campaign, shards: [(0, (0..<100).map { TestTokens.token($0, seed: 9) })])
        try await fixture.queue.publish(descriptor)
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign)?.definition.rateLimit == 10)
        let queue = fixture.queue
        let lease = try #require(try await queue.claim(campaign: fixture.campaign, worker: "w1", leaseMilliseconds: 30_000))
        let t = Self.start
        // 10 a second: bursts of 1, 2 kept at most.
        #expect(try await queue.read(lease, from: 0, count: 50, clock: t)?.tokens.count == 2)
        #expect(try await queue.read(lease, from: 2, count: 50, clock: t)?.retryAfter == .milliseconds(100))
        // Raised to 200 a second: bursts of 20, refilled at the new rate from the last grant.
        try await queue.setRateLimit(campaign: fixture.campaign, 200)
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign)?.definition.rateLimit == 200)
        #expect(try await queue.read(lease, from: 2, count: 50, clock: t + 50)?.retryAfter == .milliseconds(50))
        #expect(try await queue.read(lease, from: 2, count: 50, clock: t + 100)?.tokens.count == 20)
        // Lifted: the rest at once.
        try await queue.setRateLimit(campaign: fixture.campaign, nil)
        #expect(try await fixture.queue.descriptor(campaign: fixture.campaign)?.definition.rateLimit == nil)
        #expect(try await queue.read(lease, from: 22, count: 500, clock: t + 100)?.tokens.count == 78)
        // A campaign that is not published is left alone.
        let other = UUID()
        try await queue.setRateLimit(campaign: other, 5)
        #expect(try await fixture.command("EXISTS", "pf:{\(other.uuidString.lowercased())}:meta").integer == 0)
        try await fixture.shutdown()
    }
}
