import APNSMockServer
import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// The control plane's own servers going away mid-campaign, over both protocols. Every `pushfleet`
/// process reaches the server through an ``OutageProxy`` that cuts every connection and refuses new
/// ones while the outage lasts; the test reads `status` directly.
extension PipelineTests {
    /// Postgres holds the state: a cancel that Redis never heard (it was down) reaches the workers
    /// once Redis is back, and the campaign ends cancelled instead of being sent in full.
    @Test(arguments: ["binary", "http2"])
    func aCancelWhileRedisIsDownStopsTheWorkersOnceRedisIsBack(protocol: String) async throws {
        // The binary gateway takes at most 2,000 notifications a second per connection (16,000 for
        // the 8 connections here): without a bound, a fast run had sent and completed all 200,000
        // between the status poll that saw 5,000 and the cancel, and the cancel was refused.
        let direct = try await PipelineFixture.start(count: 200_000, faults: .init(ratePerConnection: 2_000))
        defer { Task { await direct.stop() } }
        let proxy = try await OutageProxy.start(port: try PipelineFixture.port(of: direct.redisURL))
        defer { Task { await proxy.stop() } }
        let fixture = direct.through(redis: proxy)
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }
        // HTTP/2 has no such bound in the simulator, and on a fast machine sent all 200,000 before
        // the cancel (which then was refused): the campaign is throttled to 4,000 a second, so
        // that it runs for some 50 s whatever the machine.
        let id = try await fixture.launch(["--rate", "4000"], protocol: `protocol`)
        _ = try await direct.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= 5_000 }

        proxy.cut()
        let cancel = try await PushFleetProcess.run(["campaign", "cancel", id.uuidString] + fixture.stateArguments)
        #expect(cancel.status == 0, "the cancel is recorded in Postgres even while Redis is down: \(cancel.error)")
        #expect(try await direct.status(id)["state"] as? String == "cancelled")
        try await Task.sleep(for: .seconds(3))
        proxy.restore()

        let status = try await direct.waitForStatus(id, limit: .seconds(300)) { ($0["pending"] as? Int) == 0 }
        let accepted = try #require(status["accepted"] as? Int)
        let rejected = (status["rejected"] as? [String: Int] ?? [:]).values.reduce(0, +)
        let cancelled = try #require(status["cancelled"] as? Int)
        #expect(status["state"] as? String == "cancelled")
        #expect(accepted + rejected + cancelled == direct.tokens.count)
        // Nothing goes out once it is settled, and the audience was not sent in full. (How much went
        // out first depends on the machine's speed: debug binary workers have sent over half of it
        // between the 5,000th acceptance and the cut, so no bound tighter than that is asserted.)
        let delivered = direct.mock.ledger.snapshot().distinctTokens
        try await Task.sleep(for: .seconds(2))
        #expect(direct.mock.ledger.snapshot().distinctTokens == delivered, "workers still sending after the cancel was settled")
        // Invalid tokens are never accepted; unregistered ones are refused over HTTP/2 (410), and
        // accepted over binary (the feedback service reports them later).
        let refused = direct.undeliverable(http2: `protocol` == "http2")
        let valid = direct.tokens.count - refused.count
        #expect(delivered < valid, "the workers sent the whole audience after the cancel: \(delivered) of \(valid)")
        #expect(cancelled > 0)
        await stopAll(workers + [coordinator])
    }

    /// Postgres stopped for 10 s: workers go on (they need only Redis), the coordinator loses its
    /// leadership and its rounds fail, and once Postgres is back it leads again and folds what
    /// waited in Redis. The campaign completes exactly.
    @Test(arguments: ["binary", "http2"])
    func postgresStoppedForTenSecondsMidCampaignLosesNothing(protocol: String) async throws {
        let direct = try await PipelineFixture.start(count: 100_000)
        defer { Task { await direct.stop() } }
        let proxy = try await OutageProxy.start(port: try PipelineFixture.port(of: direct.postgresURL))
        defer { Task { await proxy.stop() } }
        let fixture = direct.through(postgres: proxy)
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }
        // Throttled to 4,000 a second (some 25 s), so that Postgres stops mid-campaign whatever
        // the machine.
        let id = try await fixture.launch(["--rate", "4000"], protocol: `protocol`)
        _ = try await direct.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= 5_000 }

        proxy.cut()
        try await Task.sleep(for: .seconds(10))
        proxy.restore()

        let status = try await direct.waitForCompletion(id, limit: .seconds(900))
        if status["state"] as? String != "completed" {
            Issue.record("the coordinator's log ends:\n\(coordinator.standardError.suffix(4_000))")
        }
        let resent = try #require(status["resent"] as? Int)
        direct.expectReconciled(status, duplicatesAllowed: resent, http2: `protocol` == "http2")
        #expect(status["accepted"] as? Int == direct.mock.ledger.snapshot().distinctTokens)
        await stopAll(workers + [coordinator])
    }

    /// Redis loses everything once a fifth of the audience is delivered: `flushall` (here
    /// `FLUSHDB` of the database the fleet uses), or `restart`, a Redis without persistence that
    /// crashed and came back empty (the workers' connections cut for 2 s, through an
    /// ``OutageProxy``, and the data gone). The coordinator rebuilds the queue from Postgres (the
    /// last fold's cursors and counters, the stored audience), the workers go on with it, and the
    /// campaign completes: every valid token delivered, the counts exact, every duplicate counted
    /// in `resent` (the tokens in flight at the last fold by the rebuild, those handed out after it
    /// by the workers' reports of their lost runs), and no token Postgres had counted before the
    /// loss sent again. (The coordinator reaches Redis through the proxy in
    /// both cases, cut while the test reads what Postgres had folded: so no rebuild starts before.)
    @Test(arguments: ["binary", "http2"], ["flushall", "restart"])
    func redisLosingEverythingMidCampaignLosesNothing(protocol: String, fault: String) async throws {
        let direct = try await PipelineFixture.start(count: 100_000).onRedisDatabase(9)
        defer { Task { await direct.stop() } }
        let proxy = try await OutageProxy.start(port: try PipelineFixture.port(of: direct.redisURL))
        defer { Task { await proxy.stop() } }
        let proxied = direct.through(redis: proxy)
        let coordinator = try proxied.startCoordinator()
        // The loss must land mid-campaign: the workers start once the launch has returned (a launch
        // that returned late would otherwise find the campaign over), and the campaign is
        // throttled to 10,000 a second, so that some 8 s of it are left at the loss.
        let id = try await direct.launch(["--rate", "10000"], protocol: `protocol`)
        let workers = try (0..<2).map { _ in try (fault == "restart" ? proxied : direct).startWorker(protocol: `protocol`) }
        let deadline = ContinuousClock.now + .seconds(600)
        while direct.mock.ledger.snapshot().distinctTokens < 20_000 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }

        proxy.cut()
        let client = RedisClient(configuration: try RedisConfiguration(url: direct.redisURL), logger: silentRedisLogger)
        let reply = try await client.withConnection { try $0.command([Array("FLUSHDB".utf8)]) }
        try await client.shutdown()
        #expect(reply.string == "OK")
        let deliveredBefore = direct.mock.ledger.snapshot().distinctTokens
        let deliverable = direct.tokens.count - direct.undeliverable(http2: `protocol` == "http2").count
        #expect(deliveredBefore < deliverable, "the loss landed after every token was delivered: it tests nothing")
        let (point, shards) = try await direct.withStore { store in
            let point = try #require(try await store.recoveryPoint(id))
            return (point, try await store.shardTokens(campaign: id, shards: Array(point.cursors.indices)))
        }
        var countedBefore: [(token: DeviceToken, deliveries: Int)] = []
        for (shard, cursor) in point.cursors.enumerated() {
            for token in try #require(shards[shard])[..<cursor] {
                countedBefore.append((token: token, deliveries: direct.mock.ledger.deliveries(of: token)))
            }
        }
        if fault == "restart" { try await Task.sleep(for: .seconds(2)) }
        proxy.restore()

        let status = try await direct.waitForCompletion(id, limit: .seconds(900))
        if status["state"] as? String != "completed" {
            Issue.record("the coordinator's log ends:\n\(coordinator.standardError.suffix(4_000))")
        }
        let resent = try #require(status["resent"] as? Int)
        direct.expectReconciled(status, duplicatesAllowed: resent, http2: `protocol` == "http2")
        #expect(point.generation == 0, "no rebuild began before the folded cursors were read")
        let generation = try await direct.withStore { try await $0.campaign(id)?.queueGeneration }
        #expect(generation == 1, "the queue was rebuilt once (the campaign was not over before the loss)")
        // A token counted before the loss goes out no more after it: the rebuilt queue resumes each
        // shard at its folded cursor. (Tokens sent twice earlier, by a lease reaped under load
        // before the loss, are the old queue's re-sends, counted in `resent`.)
        let sentAgain = countedBefore.count { direct.mock.ledger.deliveries(of: $0.token) > $0.deliveries }
        #expect(!countedBefore.isEmpty)
        #expect(sentAgain == 0, "tokens counted before the loss were sent again after it")
        let counted = countedBefore.count
        print(
            "redis-\(fault) \(`protocol`): delivered before the loss \(deliveredBefore), counted before it \(counted), "
                + "duplicates \(direct.mock.ledger.snapshot().duplicateDeliveries), resent \(resent)"
        )
        await stopAll(workers + [coordinator])
    }
}
