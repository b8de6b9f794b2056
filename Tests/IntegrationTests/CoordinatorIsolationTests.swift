import Foundation
import Logging
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetServices
import PushFleetTestSupport
import Testing

/// `CoordinatorService.round()` in-process, with campaigns launched and finished by hand (no worker,
/// no APNs). In the pipeline suite, on its database: a coordinator serves every campaign of its
/// database, so these rounds never run beside another pipeline test's coordinator.
extension PipelineTests {
    @Suite struct CoordinatorIsolationTests {
        /// A campaign whose events stream holds an entry the coordinator cannot parse does not stop
        /// another from completing: `round()` logs A's error, goes on to B, and does not throw.
        /// A is the older campaign, so a round that gave up at the first error would never reach B.
        @Test func garbageInOneCampaignsEventsDoesNotStopAnother() async throws {
            try await CoordinatorHarness.run { h in
                let a = try await h.launch(tokens: 5)
                let b = try await h.launch(tokens: 5)
                let order = try await h.store.campaigns(in: [.running]).map(\.id)
                #expect(try #require(order.firstIndex(of: a)) < (try #require(order.firstIndex(of: b))))
                // A shard but no known kind: CampaignQueue.event(_:) returns nil, so events(…) throws.
                #expect(try await h.redis("XADD", "pf:{\(h.key(a))}:events", "*", "k", "garbage", "s", "0").string != nil)
                await #expect(throws: RedisError.self) { _ = try await h.queue.events(campaign: a, after: "0-0", count: 10) }
                try await h.finishEveryShard(of: b)

                try await h.coordinator.round()
                try await h.coordinator.round()
                let done = try #require(try await h.store.campaign(b))
                #expect(done.state == .completed)
                #expect((done.accepted, done.rejected, done.doneShards, done.pending) == (5, [:], 3, 0))
                #expect(try await h.keys(b) == [h.removedMark(b)], "every key gone but the mark that it was removed")
                #expect(try await h.store.campaign(a)?.state == .running)
            }
        }

        /// A finished campaign whose Redis cleanup fails stays listed by `campaignsAwaitingCleanup()`,
        /// and a later round removes its keys once the fault is gone. The fault: the topic's active
        /// set is a string, so `CampaignQueue.remove` fails (WRONGTYPE) at its `SREM`, after setting the removed mark, while
        /// the fold, which never reads that set, completes the campaign.
        @Test func aFailedCleanupIsRetriedByALaterRound() async throws {
            try await CoordinatorHarness.run { h in
                let c = try await h.launch(tokens: 4)
                try await h.finishEveryShard(of: c)
                let active = "pf:active:\(h.topic):\(h.environment)"
                _ = try await h.redis("DEL", active)
                #expect(try await h.redis("SET", active, "broken").string == "OK")

                try await h.coordinator.round()
                #expect(try await h.store.campaign(c)?.state == .completed)
                #expect(try await h.store.campaignsAwaitingCleanup().contains { $0.id == c })
                #expect(try await h.keys(c).contains("pf:{\(h.key(c))}:stats"))

                _ = try await h.redis("DEL", active)  // the fault goes away
                try await h.coordinator.round()
                #expect(try await h.keys(c) == [h.removedMark(c)])
                #expect(!(try await h.queue.activeCampaigns(topic: h.topic, environment: h.environment).contains(c)))
                #expect(!(try await h.store.campaignsAwaitingCleanup().contains { $0.id == c }))
            }
        }

        /// A shard whose holders keep dying (their leases expire five times) is set aside as dead:
        /// `status` lists it, the campaign ends `failed` with the reason once everything else is
        /// done, and `campaign retry` puts it back so the campaign completes.
        @Test func deadShardsFailTheCampaignAndRetryCompletesIt() async throws {
            try await CoordinatorHarness.run { h in
                let e = try await h.launch(tokens: 4)
                for _ in 0..<5 {
                    let lease = try #require(try await h.queue.claim(campaign: e, worker: "dies", leaseMilliseconds: 1))
                    #expect(lease.shard == 0, "a reaped shard goes back to the front")
                    try await Task.sleep(for: .milliseconds(20))
                    try await h.coordinator.round()
                }
                #expect(try await h.queue.deadShards(campaign: e) == [0])
                var record = try #require(try await h.store.campaign(e))
                #expect(record.state == .running && record.deadShards == [0])
                #expect(StatusReport(record: record).json.contains(#""dead_shards":[0]"#))

                try await h.finishEveryShard(of: e)
                try await h.coordinator.round()
                record = try #require(try await h.store.campaign(e))
                #expect(record.state == .failed)
                #expect(record.stateReason?.contains("1 shard given up after 5 claims") == true)
                #expect(record.pending == 2)
                #expect(StatusReport(record: record).text.contains("campaign retry"))

                // `campaign retry`: the dead shard back in the queue, the campaign running again.
                let retried = try await CampaignControl(queue: h.queue, store: h.store).retry(e)
                #expect(retried.shards == 1 && retried.state == .running)
                #expect(try await h.store.campaign(e)?.state == .running)
                try await h.finishEveryShard(of: e)
                try await h.coordinator.round()
                record = try #require(try await h.store.campaign(e))
                #expect(record.state == .completed && record.accepted == 4 && record.deadShards.isEmpty && record.stateReason == nil)
            }
        }

        /// A round folds about `eventsPerRound` rejected tokens and finished shards, read a page of
        /// stream entries at a time (one entry holds a checkpoint's rejections); the rest wait for
        /// the next round, which goes on at once, and each is applied once.
        @Test func roundsFoldEventsInPagesEachOnce() async throws {
            try await CoordinatorHarness.run(configuration: .init(eventsPerRound: 3)) { h in
                let c = try await h.launch(tokens: 6)
                var rejected: [Rejection] = []
                for reason in ["BadDeviceToken", "Unregistered", "BadDeviceToken"] {
                    rejected += try #require(try await h.rejectNextShard(of: c, reason: reason))
                }
                // Entries: 2 rejections, shard done, 2 rejections, shard done, 2 rejections, shard done.
                let failures = { try await h.store.tokenFailures(campaign: c).count }
                try await h.coordinator.round()
                #expect(try await failures() == 4, "three entries, five events: the round stops after the page that passed 3")
                #expect(try await h.store.campaign(c)?.state == .running)
                try await h.coordinator.round()
                #expect(try await failures() == 6)
                #expect(try await h.store.campaign(c)?.state == .running, "a full page: more may wait, so not caught up")
                try await h.coordinator.round()
                let done = try #require(try await h.store.campaign(c))
                #expect(done.state == .completed)
                #expect((done.accepted, done.rejected, done.doneShards, done.pending) == (0, ["BadDeviceToken": 4, "Unregistered": 2], 3, 0))
                let stored = try await h.store.tokenFailures(campaign: c)
                #expect(Set(stored.map(\.token)) == Set(rejected.map(\.token)))
                #expect(stored.allSatisfy { failure in rejected.contains { $0.token == failure.token && $0.reason == failure.reason } })
            }
        }

        /// An operator's cancel (or pause, or resume) that reached Postgres but not Redis, which was
        /// down: the coordinator tells Redis Postgres' state at its next round, so workers stop.
        @Test func aStateRedisMissedIsAppliedByTheNextRound() async throws {
            try await CoordinatorHarness.run { h in
                let d = try await h.launch(tokens: 4)
                let status = { try await h.redis("HGET", "pf:{\(h.key(d))}:meta", "status").string }
                #expect(try await h.store.setState(d, to: .paused, from: [.running]))
                #expect(try await status() == "running")
                try await h.coordinator.round()
                #expect(try await status() == "paused")
                #expect(try await h.store.setState(d, to: .cancelled, from: [.paused]))
                try await h.coordinator.round()
                // Cancelled with no lease left, it is also settled at once and its keys go.
                let settled = try await h.keys(d) == [h.removedMark(d)]
                let current = try await status()
                #expect(settled || current == "cancelled")
                #expect(try await h.queue.claim(campaign: d, worker: "w", leaseMilliseconds: 1_000) == nil, "a cancelled campaign hands out no work")
            }
        }
    }
}

/// Redis, the pipeline database, a quiet coordinator, and campaigns of a topic of its own.
struct CoordinatorHarness {
    let queue: CampaignQueue
    let store: CampaignStore
    let coordinator: CoordinatorService
    let topic = PostgresFixture.topic("isolation")
    let environment = APNsEnvironment.production

    static func run(configuration: CoordinatorService.Configuration = .init(), _ body: (CoordinatorHarness) async throws -> Void) async throws {
        let client = RedisClient(configuration: try RedisConfiguration(url: try IntegrationEnvironment.redisURL()), logger: silentRedisLogger)
        let store = CampaignStore(configuration: try PostgresConfiguration(url: try IntegrationEnvironment.pipelinePostgresURL()), logger: PostgresFixture.logger)
        let running = Task { await store.run() }
        defer { running.cancel() }
        try await store.migrate()
        var logger = Logger(label: "pushfleet.test.coordinator")
        logger.logLevel = .error  // not the warnings these tests provoke on purpose
        let queue = CampaignQueue(client: client)
        let harness = CoordinatorHarness(queue: queue, store: store, coordinator: CoordinatorService(configuration: configuration, queue: queue, store: store, logger: logger))
        do {
            try await body(harness)
        } catch {
            try? await harness.tidy()
            try? await client.shutdown()
            throw error
        }
        try await harness.tidy()
        try await client.shutdown()
    }

    func key(_ id: UUID) -> String { id.uuidString.lowercased() }

    /// Launches `tokens` fresh tokens in shards of 2 with the Launcher, as `pushfleet launch` does.
    func launch(tokens count: Int, startsAt: Date? = nil) async throws -> UUID {
        var tokens = Tokens(left: TestTokens.tokens(count, seed: UInt64.random(in: 1...UInt64.max)))
        let payload = try Payload(jsonText: Array(#"{"aps":{"alert":"hi"}}"#.utf8), format: .http2)
        var request = Launcher.Request(
            definition: CampaignDefinition(topic: self.topic, environment: self.environment, payload: payload.bytes), shardSize: 2
        )
        request.startsAt = startsAt
        return try await Launcher(queue: self.queue, store: self.store).launch(request, tokens: &tokens).id
    }

    /// What a worker would do without APNs: every shard claimed, all its tokens from the cursor on
    /// accepted, completed.
    func finishEveryShard(of id: UUID) async throws {
        while try await self.finishNextShard(of: id) != nil {}
    }

    /// The same for the next pending shard only; `reading` reads its tokens first, as a sender
    /// would (raising the shard's `sent` mark). - Returns: its lease, or nil when none was pending.
    @discardableResult
    func finishNextShard(of id: UUID, reading: Bool = false) async throws -> ShardLease? {
        guard let lease = try await self.queue.claim(campaign: id, worker: "isolation", leaseMilliseconds: 30_000) else { return nil }
        if reading {
            #expect(try await self.queue.read(lease, from: lease.cursor, count: lease.tokenCount)?.tokens.count == lease.tokenCount - lease.cursor)
        }
        let delta = CheckpointDelta(sequence: 1, cursor: lease.tokenCount, accepted: lease.tokenCount - lease.cursor)
        #expect(try await self.queue.checkpoint(lease, delta, leaseMilliseconds: 30_000) == .ok(.running))
        #expect(try await self.queue.complete(lease))
        return lease
    }

    /// The next pending shard with every token from its cursor rejected in one checkpoint, as
    /// `reason`, then completed. - Returns: the rejections, or nil when no shard was pending.
    func rejectNextShard(of id: UUID, reason: String) async throws -> [Rejection]? {
        guard let lease = try await self.queue.claim(campaign: id, worker: "isolation", leaseMilliseconds: 30_000) else { return nil }
        let tokens = try #require(try await self.queue.read(lease, from: lease.cursor, count: lease.tokenCount)?.tokens)
        let rejections = tokens.map { Rejection(token: $0, reason: RejectionReason(reason)) }
        let delta = CheckpointDelta(sequence: 1, cursor: lease.tokenCount, rejections: rejections)
        #expect(try await self.queue.checkpoint(lease, delta, leaseMilliseconds: 30_000) == .ok(.running))
        #expect(try await self.queue.complete(lease))
        return rejections
    }

    /// Every shard finished, then a coordinator round: the campaign's record after it.
    func finishEveryShardAndFold(of id: UUID) async throws -> CampaignRecord {
        try await self.finishEveryShard(of: id)
        try await self.coordinator.round()
        return try #require(try await self.store.campaign(id))
    }

    func redis(_ parts: any RedisArgumentConvertible...) async throws -> RedisReply {
        let arguments = parts.map(\.redisArgument)
        return try await self.queue.client.withConnection { try $0.command(arguments) }
    }

    /// Every Redis key of a campaign.
    func keys(_ id: UUID) async throws -> Set<String> {
        Set(try #require(try await self.redis("KEYS", "pf:{\(self.key(id))}*").array).compactMap(\.string))
    }

    /// The key that says a finished campaign's queue was removed (it stays a week).
    func removedMark(_ id: UUID) -> String { "pf:{\(self.key(id))}:removed" }

    /// Leaves nothing for later coordinators of the pipeline database: this topic's campaigns that
    /// are not finished fail, and every Redis key of its campaigns goes.
    private func tidy() async throws {
        for campaign in try await self.store.campaigns(in: [.running, .paused, .completed]) where campaign.topic == self.topic {
            _ = try await self.store.setState(campaign.id, to: .failed, from: [.running, .paused])
            for key in try await self.keys(campaign.id) { _ = try await self.redis("DEL", key) }
            _ = try await self.redis("SREM", "pf:active:\(self.topic):\(self.environment)", self.key(campaign.id))
            try await self.store.markQueueRemoved(campaign.id)
        }
    }
}

/// An audience held in memory.
private struct Tokens: TokenSource {
    var left: [DeviceToken]
    var batchValues: RecipientValueList? { nil }

    mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        defer { self.left.removeFirst(min(maximum, self.left.count)) }
        return Array(self.left.prefix(maximum))
    }
}
