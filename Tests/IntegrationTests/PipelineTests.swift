import APNSMockServer
import Foundation
import NIOCore
import PushFleetCore
import PushFleetPostgres
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A 200,000-token campaign with 1% invalid and 1% unregistered tokens through three workers, a
/// coordinator and the simulator, with workers and the coordinator killed along the way.
@Suite(.serialized) struct PipelineTests {
    static let count = 200_000

    @Test func threeWorkersCompleteACampaignExactly() async throws {
        let fixture = try await PipelineFixture.start(count: Self.count)
        defer { Task { await fixture.stop() } }
        // The registry holds the stale tokens but one invalid one: not a registered device, so
        // its verdict stays with the campaign and out of the registry. (An unregistered token
        // the feedback service lists is added either way: it has no other record.)
        let strayInvalid = try #require(fixture.invalid.first)
        try await fixture.registerStaleTokens(except: [strayInvalid])
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<3).map { _ in try fixture.startWorker() }
        let id = try await fixture.launch()
        let status = try await fixture.waitForCompletion(id)
        fixture.expectReconciled(status, duplicatesAllowed: 0)
        #expect(status["resent"] as? Int == 0)

        // Invalid tokens are marked in the registry; unregistered ones after the feedback poll.
        try await fixture.withStore { store in
            for token in fixture.invalid where token != strayInvalid {
                #expect(try await store.tokenStatus(token, topic: fixture.topic, environment: .production) == .invalid)
            }
            #expect(try await store.tokenStatus(strayInvalid, topic: fixture.topic, environment: .production) == nil)
            let recorded = try await store.tokenFailures(campaign: id, limit: fixture.tokens.count)
            #expect(recorded.count == fixture.invalid.count, "every invalid token recorded")
            #expect(recorded.contains { $0.token == strayInvalid && $0.reason == .invalidToken })
            let start = ContinuousClock.now
            var marked = 0
            while ContinuousClock.now - start < .seconds(60) {
                marked = 0
                for token in fixture.unregistered where try await store.tokenStatus(token, topic: fixture.topic, environment: .production) == .unregistered {
                    marked += 1
                }
                if marked == fixture.unregistered.count { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            #expect(marked == fixture.unregistered.count)
        }
        for worker in workers { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in workers { #expect(await worker.wait() == 0) }
        #expect(await coordinator.wait() == 0)
    }

    @Test func workersKilledMidShardLoseNothing() async throws {
        let fixture = try await PipelineFixture.start(count: Self.count)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        // A connection holds at most 4 shards, or 3,000 unconfirmed tokens and one more shard: 4,000.
        let bounded = ["--confirm-every", "3000"]
        var workers = try (0..<3).map { _ in try fixture.startWorker(extra: bounded) }
        let id = try await fixture.launch()
        for kill in 1...2 {
            _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= kill * Self.count / 4 }
            workers[0].signal(SIGKILL)
            await workers[0].wait()
            workers[0] = try fixture.startWorker(extra: bounded)
        }
        let status = try await fixture.waitForCompletion(id)
        // Re-sends are counted, bounded by what two killed workers held unconfirmed (4 connections
        // with 4,000 tokens each), and every duplicate delivery is one of them.
        let resent = try #require(status["resent"] as? Int)
        #expect(resent <= 2 * 4 * 4 * 1_000)
        fixture.expectReconciled(status, duplicatesAllowed: resent)
        for worker in workers { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in workers { await worker.wait() }
        await coordinator.wait()
    }

    @Test func sigtermDrainsWithoutDuplicates() async throws {
        let fixture = try await PipelineFixture.start(count: Self.count)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<3).map { _ in try fixture.startWorker() }
        let id = try await fixture.launch()
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= Self.count / 3 }
        workers[1].signal(SIGTERM)
        #expect(await workers[1].wait() == 0, "a draining worker exits cleanly")
        let status = try await fixture.waitForCompletion(id)
        fixture.expectReconciled(status, duplicatesAllowed: 0)
        #expect(status["resent"] as? Int == 0)
        for worker in [workers[0], workers[2]] { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in workers { await worker.wait() }
        await coordinator.wait()
    }

    @Test func coordinatorRestartCountsNothingTwice() async throws {
        let fixture = try await PipelineFixture.start(count: Self.count)
        defer { Task { await fixture.stop() } }
        var coordinator = try fixture.startCoordinator()
        let workers = try (0..<3).map { _ in try fixture.startWorker() }
        let id = try await fixture.launch()
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= Self.count / 3 }
        coordinator.signal(SIGKILL)
        await coordinator.wait()
        try await Task.sleep(for: .seconds(2))
        coordinator = try fixture.startCoordinator()
        let status = try await fixture.waitForCompletion(id)
        fixture.expectReconciled(status, duplicatesAllowed: 0)
        for worker in workers { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in workers { await worker.wait() }
        await coordinator.wait()
    }

    @Test func frozenWorkerSendsNothingAfterItsLeaseWasTakenOver() async throws {
        // The frozen worker talks to a gateway of its own that reads as fast as data arrives: while
        // the worker is stopped, that gateway drains everything written before the freeze, so
        // whatever it accepts after SIGCONT was written after the worker resumed.
        let fixture = try await PipelineFixture.start(count: 20_000, invalidEvery: nil, unregisteredEvery: nil)
        let frozenGateway = try await BinaryFixture.start(errorDelay: .milliseconds(200))
        defer { Task { await fixture.stop(); await frozenGateway.stop() } }
        let coordinator = try fixture.startCoordinator()
        let frozen = try fixture.startWorker(connections: 2, leaseMilliseconds: 2_000, gateway: frozenGateway)
        let id = try await fixture.launch()
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= 2_000 }
        frozen.signal(SIGSTOP)
        // What was written before the freeze drains from the kernel's buffers: wait until the
        // gateway's count holds still for a second (on a loaded machine it takes longer than that).
        var acceptedWhileFrozen = frozenGateway.ledger.snapshot().accepted
        var still = 0
        while still < 4 {
            try await Task.sleep(for: .milliseconds(250))
            let now = frozenGateway.ledger.snapshot().accepted
            still = now == acceptedWhileFrozen ? still + 1 : 0
            acceptedWhileFrozen = now
        }
        let other = try fixture.startWorker(connections: 4, leaseMilliseconds: 2_000)
        let status = try await fixture.waitForCompletion(id)
        #expect(frozenGateway.ledger.snapshot().accepted == acceptedWhileFrozen, "nothing arrives while the worker is stopped")

        frozen.signal(SIGCONT)
        try await Task.sleep(for: .seconds(3))
        // At most the one batch (100 frames) that was handed to the connection before the freeze,
        // when the kernel's buffer was full, may leave after the resume; nothing new is written.
        let afterResume = frozenGateway.ledger.snapshot().accepted - acceptedWhileFrozen
        #expect(afterResume <= 100 * 2, "the frozen worker wrote \(afterResume) notifications after it resumed (2 connections)")

        // Nothing lost across the two gateways; every duplicate is a counted re-send.
        let lost = fixture.tokens.count { fixture.mock.ledger.deliveries(of: $0) + frozenGateway.ledger.deliveries(of: $0) == 0 }
        #expect(lost == 0)
        let delivered = fixture.mock.ledger.snapshot().accepted + frozenGateway.ledger.snapshot().accepted
        #expect(delivered - fixture.tokens.count <= status["resent"] as? Int ?? 0)
        #expect(status["accepted"] as? Int == fixture.tokens.count)
        for worker in [frozen, other] { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in [frozen, other] { await worker.wait() }
        await coordinator.wait()
    }
}
