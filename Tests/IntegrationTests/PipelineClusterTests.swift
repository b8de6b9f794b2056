import Foundation
import PushFleetRedis
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The fleet on the 3-master Redis Cluster of `scripts/test.sh`: a campaign's keys live in one
/// slot; the active sets, backlog lists and other campaigns live in others, on other masters.
extension PipelineTests {
    @Test(arguments: ["binary", "http2"])
    func aCampaignCompletesExactlyOnARedisCluster(protocol: String) async throws {
        let fixture = try await PipelineFixture.start(count: 100_000).onRedisCluster()
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let id = try await fixture.launch(protocol: `protocol`)

        // The campaign's keys are where the cluster says its slot is, and only there. Looked for
        // before any worker starts: a fast machine finished the campaign and removed its keys
        // between the launch and the look.
        let client = RedisClient(configuration: try RedisConfiguration(url: fixture.redisURL), logger: silentRedisLogger)
        let meta = "pf:{\(id.uuidString.lowercased())}:meta"
        let (exists, isCluster, masters) = try await client.withConnection { connection in
            (try connection.command("EXISTS", meta), connection.isCluster, connection.clusterMasters)
        }
        try await client.shutdown()
        #expect(exists == .integer(1))
        #expect(isCluster)
        #expect(masters.count == 3)
        let slot = RedisClusterSlot.of(Array(id.uuidString.lowercased().utf8))
        var holders = 0
        for master in masters {
            let node = RedisClient(configuration: try RedisConfiguration(url: "redis://\(master)"), logger: silentRedisLogger)
            let reply = try await node.withConnection { try $0.command("CLUSTER", "COUNTKEYSINSLOT", slot) }
            try await node.shutdown()
            // Each node counts only the keys it holds.
            if reply.integer ?? 0 > 0 { holders += 1 }
        }
        #expect(holders == 1)
        var workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }

        // A worker killed mid-campaign: its leases are reaped and its shards' tails taken over.
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= 25_000 }
        workers[0].signal(SIGKILL)
        await workers[0].wait()
        workers[0] = try fixture.startWorker(protocol: `protocol`)

        let status = try await fixture.waitForCompletion(id, limit: .seconds(1_200))
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: `protocol` == "http2")
        for worker in workers { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in workers { #expect(await worker.wait() == 0) }
        #expect(await coordinator.wait() == 0)
    }
}
