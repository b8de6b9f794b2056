import APNSMockServer
import Foundation
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The crash tests of `PipelineTests` over HTTP/2: 60,000 tokens (1% `BadDeviceToken`, 1% `410
/// Unregistered`), three workers with provider-token auth, 100 streams per connection, and a
/// worker or the coordinator killed, frozen or drained along the way (the kill, the freeze and
/// the drain against the unkind gateway too, with a fifth of the audience stale; a drain while the
/// gateway answers 429 and 503 to be retried, against either gateway); then one
/// connection carrying 200,000 tokens with 20% rejections at APNs' 1,000 streams. In the pipeline
/// suite, so their coordinator never leads while another pipeline test runs.
extension PipelineTests {
    /// The audience of the three-worker tests: 60 shards of 1,000, each worker holding 8 of them
    /// at once. The kills, the freeze and the drain come at fractions of it, and what they test
    /// does not depend on its size; the debug simulator answers some 500 requests a second on a
    /// loaded 2-core machine, so 200,000 tokens made each of these tests last seven minutes.
    static let crashCount = 60_000

    /// Streams per connection in the three-worker tests. At APNs' 1,000, six connections keep 6,000
    /// requests in flight, and a debug build on a loaded machine answers some 500 a second: a
    /// request then waits close to the 10-second request timeout, and timed-out connections re-send.
    static let crashStreams = 100

    /// The crash tests' simulator: against the unkind gateway, a tenth of the audience answered
    /// `BadDeviceToken` and a tenth `Unregistered`, each with a body the workers must return
    /// flow-control credit for in a window of 65,535 bytes.
    static func crashFixture(_ manner: GatewayManner) async throws -> PipelineFixture {
        let stale = manner == .unkind ? 10 : 100
        return try await PipelineFixture.start(
            count: Self.crashCount, invalidEvery: stale, unregisteredEvery: stale, maxConcurrentStreams: Self.crashStreams, manner: manner
        )
    }

    @Test(arguments: [GatewayManner.kind, .unkind])
    func http2WorkerKilledTwiceLosesNothing(_ manner: GatewayManner) async throws {
        let fixture = try await Self.crashFixture(manner)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        var workers = try (0..<3).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let id = try await fixture.launch(protocol: "http2")
        for kill in 1...2 {
            _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= kill * Self.crashCount / 4 }
            workers[0].signal(SIGKILL)
            await workers[0].wait()
            workers[0] = try fixture.startHTTP2Worker(.providerToken)
        }
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        // What a killed worker held unanswered is counted as re-sent on reclaim, and every duplicate
        // delivery is one of those. No bound on the count: on a loaded machine the survivors'
        // leases may run out as well, and their releases are counted re-sends too.
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: true)
        fixture.expectCountsAddUp(status)
        await stopAll(workers + [coordinator])
    }

    @Test(arguments: [GatewayManner.kind, .unkind])
    func http2WorkerFrozenPastItsLeaseLosesNothing(_ manner: GatewayManner) async throws {
        let fixture = try await Self.crashFixture(manner)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<3).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let id = try await fixture.launch(protocol: "http2")
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= Self.crashCount / 4 }
        // Stopped for well over its 3 s lease: the coordinator reaps its shards and the other two
        // workers take them over; on SIGCONT it finds its leases gone and must count nothing twice.
        workers[0].signal(SIGSTOP)
        try await Task.sleep(for: .seconds(8))
        workers[0].signal(SIGCONT)
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: true)
        fixture.expectCountsAddUp(status)
        await stopAll(workers + [coordinator])
    }

    @Test(arguments: [GatewayManner.kind, .unkind])
    func http2SigtermDrainsWithoutDuplicates(_ manner: GatewayManner) async throws {
        let fixture = try await Self.crashFixture(manner)
        defer { Task { await fixture.stop() } }
        _ = try await Self.drainOneOfThreeWorkers(fixture)
    }

    /// The drain while the gateway asks for retries: every 50th stream answered 429 (retried after
    /// a backoff of a second or more) and every 70th 503. The draining worker holds notifications
    /// waiting out a backoff, and others written again and unanswered; it must finish or hand back
    /// each of them, so that nothing is lost, delivered twice, or counted twice.
    @Test(arguments: [GatewayManner.kind, .unkind])
    func http2SigtermDrainsWhileRetryingWithoutDuplicates(_ manner: GatewayManner) async throws {
        let fixture = try await PipelineFixture.start(
            count: Self.crashCount, http2Faults: .init(tooManyRequestsEvery: 50, serviceUnavailableEvery: 70),
            maxConcurrentStreams: Self.crashStreams, manner: manner
        )
        defer { Task { await fixture.stop() } }
        let (status, drained) = try await Self.drainOneOfThreeWorkers(fixture)
        #expect((drained["retried"] ?? 0) > 0, "the drained worker never retried: the test missed its case")
        // Each 429 and 503 the simulator answered was a request to make again, and counted once.
        let snapshot = fixture.mock.ledger.snapshot()
        let retryable = (snapshot.rejected["TooManyRequests"] ?? 0) + (snapshot.rejected["ServiceUnavailable"] ?? 0)
        #expect(retryable > 0)
        #expect(status["retried"] as? Int == retryable, "retried is not the number of 429 and 503 answers")
    }

    /// Three workers, the second drained by SIGTERM a third of the way in: it exits cleanly, and the
    /// campaign completes exactly with nothing delivered twice. Returns the final status and the
    /// drained worker's sender counters.
    private static func drainOneOfThreeWorkers(_ fixture: PipelineFixture) async throws -> (status: [String: Any], drained: [String: Int]) {
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<3).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let id = try await fixture.launch(protocol: "http2")
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= Self.crashCount / 3 }
        workers[1].signal(SIGTERM)
        #expect(await workers[1].wait() == 0, "a draining worker exits cleanly")
        let drained = try #require(senderCounters(workers[1].standardOutput), "no `sender {…}` line: \(workers[1].standardOutput)")
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: true)
        fixture.expectCountsAddUp(status)
        #expect(status["resent"] as? Int == 0)
        await stopAll([workers[0], workers[2], coordinator])
        return (status, drained)
    }

    @Test func http2CoordinatorRestartCountsNothingTwice() async throws {
        let fixture = try await PipelineFixture.start(count: Self.crashCount, maxConcurrentStreams: Self.crashStreams)
        defer { Task { await fixture.stop() } }
        var coordinator = try fixture.startCoordinator()
        let workers = try (0..<3).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let id = try await fixture.launch(protocol: "http2")
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= Self.crashCount / 3 }
        coordinator.signal(SIGKILL)
        await coordinator.wait()
        try await Task.sleep(for: .seconds(2))
        coordinator = try fixture.startCoordinator()
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        // The restart itself re-sends nothing; but on a machine loaded by other suites a worker's
        // lease or a request may run out meanwhile, and those re-sends are counted. The counts
        // stay exact either way.
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: true)
        fixture.expectCountsAddUp(status)
        await stopAll(workers + [coordinator])
    }

    /// One connection carrying 20% rejections (each answer has a JSON body, which the client must
    /// give flow-control credit back for): nothing may stall into a request timeout or be re-sent.
    @Test func http2OneConnectionCarriesManyRejectionsWithoutStalling() async throws {
        let fixture = try await PipelineFixture.start(count: Self.count, invalidEvery: 10, unregisteredEvery: 10, maxConcurrentStreams: 1000)
        defer { Task { await fixture.stop() } }
        // Strides from 5 and from 2 by 10: two disjoint sets of 10% each.
        #expect(fixture.invalid.isDisjoint(with: fixture.unregistered))
        #expect(fixture.invalid.count == Self.count / 10 && fixture.unregistered.count == Self.count / 10)
        let coordinator = try fixture.startCoordinator()
        let worker = try fixture.startHTTP2Worker(.providerToken, connections: 1)
        let id = try await fixture.launch(protocol: "http2")
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: true)
        fixture.expectCountsAddUp(status)
        #expect(status["resent"] as? Int == 0)
        #expect(status["retried"] as? Int == 0)

        worker.signal(SIGTERM)
        #expect(await worker.wait() == 0)
        let counters = try #require(senderCounters(worker.standardOutput), "no `sender {…}` line on the worker's standard output: \(worker.standardOutput)")
        // The campaign's one connection, and the notification lane's, opened at start and idle.
        #expect(counters["connections_opened"] == 2)
        #expect(counters["request_timeouts"] == 0)
        #expect(counters["resent"] == 0)
        #expect(counters["retried"] == 0)
        await stopAll([coordinator])
    }
}

extension PipelineFixture {
    /// Postgres's counts add up to the audience, and its accepted count is the number of distinct
    /// tokens the simulator accepted: no outcome counted twice, none missing.
    fileprivate func expectCountsAddUp(_ status: [String: Any]) {
        let accepted = status["accepted"] as? Int ?? -1
        let rejected = (status["rejected"] as? [String: Int] ?? [:]).values.reduce(0, +)
        #expect(accepted + rejected == self.tokens.count, "accepted \(accepted) + rejected \(rejected) is not the total")
        #expect(accepted == self.mock.ledger.snapshot().distinctTokens, "accepted is not the ledger's distinct tokens")
    }
}

/// The counters `pushfleet worker` prints on standard output when it exits after SIGTERM:
/// `sender {"connections_opened":N,"request_timeouts":N,"resent":N,"retried":N}`.
private func senderCounters(_ output: String) -> [String: Int]? {
    guard let line = output.split(separator: "\n").last(where: { $0.hasPrefix("sender ") }) else { return nil }
    return (try? JSONSerialization.jsonObject(with: Data(line.dropFirst("sender ".count).utf8))) as? [String: Int]
}

/// SIGTERM to each, then waits for all.
