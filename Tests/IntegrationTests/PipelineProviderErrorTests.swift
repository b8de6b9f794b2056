import APNSMockServer
import Foundation
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A typo must not burn an audience: workers started with a wrong `--team-id` get
/// `403 InvalidProviderToken` for every request. That is about the provider, not the tokens, so the
/// campaign pauses with the reason and nothing is counted as rejected; restarted with the right id
/// and resumed, it completes exactly.
extension PipelineTests {
    @Test func aWrongTeamIDPausesTheCampaignAndResumeCompletesIt() async throws {
        let fixture = try await PipelineFixture.start(count: 50_000)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let wrong = try (0..<2).map { _ in try fixture.startHTTP2Worker(.providerToken, teamID: "WRONGTEAM1") }
        let id = try await fixture.launch(protocol: "http2")

        let paused = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "paused" }
        #expect(paused["state"] as? String == "paused")
        #expect((paused["reason"] as? String)?.contains("InvalidProviderToken") == true, "\(paused)")
        #expect((paused["reason"] as? String)?.contains("team WRONGTEAM1") == true, "\(paused)")
        for worker in wrong { worker.signal(SIGTERM) }
        for worker in wrong { #expect(await worker.wait() == 0) }
        let stopped = try await fixture.status(id)
        #expect(stopped["rejected"] as? [String: Int] == [:], "provider-level refusals are no token's outcome")
        #expect(stopped["accepted"] as? Int == 0)
        #expect(fixture.mock.ledger.snapshot().accepted == 0)

        let right = try (0..<2).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let resumed = try await PushFleetProcess.run(["campaign", "resume", id.uuidString] + fixture.stateArguments)
        #expect(resumed.status == 0, "\(resumed.error)")
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(status["resent"] as? Int == 0)
        #expect(status["reason"] is NSNull)
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: true)
        for worker in right { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in right { await worker.wait() }
        await coordinator.wait()
    }

    /// APNs failing (every request answered 503 for a while) is no one's typo: the campaign pauses
    /// with the reason, the coordinator resumes it by itself (and pauses it again while the
    /// outage lasts), and once APNs is healthy it completes with no `ServiceUnavailable` rejection.
    @Test func anAPNsOutagePausesTheCampaignUntilItHeals() async throws {
        let fixture = try await PipelineFixture.start(count: 50_000)
        defer { Task { await fixture.stop() } }
        let (coordinator, workers, id) = try await Self.startCampaignForAnOutage(fixture)

        fixture.mock.server.outage.set(503)
        let paused = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "paused" }
        #expect((paused["reason"] as? String)?.contains("ServiceUnavailable (HTTP 503)") == true, "\(paused)")
        #expect(paused["resumes_at"] is String, "an outage pause resumes by itself: \(paused)")
        // Resumed by the coordinator at least once while APNs still fails, and paused again.
        _ = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "running" }
        _ = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "paused" }
        fixture.mock.server.outage.set(nil)

        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(status["reason"] is NSNull)
        #expect(status["resumes_at"] is NSNull)
        // Outage answers are retries, never outcomes: the rejections are exactly the stale tokens.
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: true)
        await stopAll(workers + [coordinator])
    }

    /// An outage pause sends nothing twice, and a worker stopped by SIGTERM while the campaign is
    /// paused exits cleanly and costs nothing. Each run that pauses gives its shard back at its mark, below the first position
    /// APNs failed, with the positions above it APNs had accepted before the outage: the next
    /// holders count those without sending them again. Nothing died and no connection dropped, so
    /// nothing may be delivered twice (before those positions went with the release, 282 of these
    /// 50,000 were, each counted in `resent`).
    @Test(arguments: [GatewayManner.kind, .unkind])
    func anAPNsOutagePauseSendsNothingTwice(_ manner: GatewayManner) async throws {
        let fixture = try await PipelineFixture.start(count: 50_000, manner: manner)
        defer { Task { await fixture.stop() } }
        let (coordinator, workers, id) = try await Self.startCampaignForAnOutage(fixture)

        fixture.mock.server.outage.set(503)
        _ = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "paused" }
        workers[1].signal(SIGTERM)
        #expect(await workers[1].wait() == 0, "a worker drained during an outage pause exits cleanly")
        fixture.mock.server.outage.set(nil)

        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(status["reason"] is NSNull)
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: true)
        #expect(status["resent"] as? Int == 0)
        let rejected = status["rejected"] as? [String: Int] ?? [:]
        #expect(rejected["ServiceUnavailable"] == nil, "an outage answer became an outcome: \(rejected)")
        #expect(rejected.values.reduce(0, +) + (status["accepted"] as? Int ?? 0) == fixture.tokens.count)
        await stopAll([workers[0], coordinator])
    }

    /// A coordinator that resumes an outage pause after 2 s, two HTTP/2 workers, and the fixture's
    /// campaign 5,000 tokens in. Throttled, so that an outage begins with most of the campaign still
    /// to send: unthrottled, a fast machine delivered all 50,000 before the test could start it (CI
    /// saw it).
    private static func startCampaignForAnOutage(
        _ fixture: PipelineFixture
    ) async throws -> (coordinator: PushFleetProcess, workers: [PushFleetProcess], id: UUID) {
        let coordinator = try fixture.startCoordinator(["--outage-resume-s", "2"])
        let workers = try (0..<2).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let id = try await fixture.launch(["--rate", "4000"], protocol: "http2")
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= 5_000 }
        return (coordinator, workers, id)
    }
}
