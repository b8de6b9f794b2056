import Foundation
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The deployments run two coordinators, one leading and one waiting for the leadership lock
/// (`deploy/compose.yaml`, `deploy/kubernetes/coordinator.yaml`). The leader killed mid-campaign
/// frees the lock with its Postgres session; the standby leads from then on, forgets what it knew
/// of the folds, and the campaign completes with each outcome counted once, over either protocol
/// (binary: the standby polls the feedback service too).
extension PipelineTests {
    @Test(arguments: ["binary", "http2"])
    func theStandbyCoordinatorTakesOverFromAKilledLeader(_ wire: String) async throws {
        let fixture = try await PipelineFixture.start(count: 40_000)
        defer { Task { await fixture.stop() } }
        let (id, leader, standby, workers) = try await Self.campaignUnderTwoCoordinators(fixture, wire)
        leader.signal(SIGKILL)
        await leader.wait()
        // The kill landed mid-campaign: it was not over, and the standby is the one that completes it.
        let atKill = try await fixture.status(id)
        #expect(
            !Self.isFinal(atKill), "the kill landed mid-campaign: \(atKill)\n\(standby.standardError.suffix(3_000))\n\(workers.map { $0.standardError.suffix(1_000) })"
        )

        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(Self.leads(standby), "the standby took the lead: \(standby.standardError.suffix(2_000))")
        #expect(Self.completed(id, by: standby), "the standby completed the campaign: \(standby.standardError.suffix(2_000))")
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: wire == "http2")
        let accepted = status["accepted"] as? Int ?? -1
        let rejected = (status["rejected"] as? [String: Int] ?? [:]).values.reduce(0, +)
        #expect(accepted + rejected == fixture.tokens.count, "accepted \(accepted) + rejected \(rejected) is not the total")
        await stopAll(workers + [standby])
    }

    /// A leader frozen (SIGSTOP) keeps its socket open, and so, before, its session and the lock:
    /// no coordinator led for as long as it was stopped. Postgres now ends the leadership session
    /// once it has been idle for twice as long as the leader lets a ping go unanswered, the standby
    /// leads, and the campaign completes with the old leader still stopped. Continued, the old
    /// leader finds its lock gone and stops leading; the counts stay exact.
    @Test(arguments: ["binary", "http2"])
    func theStandbyCoordinatorTakesOverFromAFrozenLeader(_ wire: String) async throws {
        let fixture = try await PipelineFixture.start(count: 40_000)
        defer { Task { await fixture.stop() } }
        let (id, leader, standby, workers) = try await Self.campaignUnderTwoCoordinators(fixture, wire)
        leader.signal(SIGSTOP)
        // A round under way may still commit; then nothing changes the state until the standby leads.
        try await Task.sleep(for: .seconds(1))
        let atFreeze = try await fixture.status(id)
        #expect(
            !Self.isFinal(atFreeze), "the freeze landed mid-campaign: \(atFreeze)\n\(standby.standardError.suffix(3_000))\n\(workers.map { $0.standardError.suffix(1_000) })"
        )
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(Self.leads(standby), "the standby took the lead: \(standby.standardError.suffix(2_000))")
        #expect(Self.completed(id, by: standby), "the standby completed the campaign: \(standby.standardError.suffix(2_000))")
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: wire == "http2")

        leader.signal(SIGCONT)
        let deadline = ContinuousClock.now + .seconds(120)
        while !leader.standardError.contains("lost the leadership lock"), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(leader.standardError.contains("lost the leadership lock"), "\(leader.standardError.suffix(2_000))")
        // A round the old leader had under way when it was stopped may commit late: it counts nothing twice.
        try await Task.sleep(for: .seconds(2))
        let after = try await fixture.status(id)
        #expect(after["state"] as? String == "completed")
        #expect(after["accepted"] as? Int == status["accepted"] as? Int)
        #expect(after["rejected"] as? [String: Int] == status["rejected"] as? [String: Int])
        await stopAll(workers + [standby, leader])
    }

    /// Two coordinators, the first leading, two workers of `wire`, and a campaign a tenth delivered
    /// and throttled to take 20 s for the rest, so that what befalls the leader lands mid-campaign.
    static func campaignUnderTwoCoordinators(
        _ fixture: PipelineFixture, _ wire: String
    ) async throws -> (id: UUID, leader: PushFleetProcess, standby: PushFleetProcess, workers: [PushFleetProcess]) {
        let first = try fixture.startCoordinator(Self.leadershipLogged)
        // The first leads before the second contends.
        try await Self.waitUntilLeads(first)
        let second = try fixture.startCoordinator(Self.leadershipLogged)
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: wire) }
        let id = try await fixture.launch(["--rate", "2000"], protocol: wire)
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= fixture.tokens.count / 10 }
        #expect(Self.leads(first) && !Self.leads(second), "the first leads, the second waits")
        return (id, first, second, workers)
    }

    /// Coordinators that say when they lead (at `info`; the tests' processes log warnings only).
    static let leadershipLogged = ["--log-level", "info"]

    /// Whether `coordinator` has said it leads.
    static func leads(_ coordinator: PushFleetProcess) -> Bool {
        coordinator.standardError.contains("coordinator leads")
    }

    /// Whether `status` says the campaign has ended.
    static func isFinal(_ status: [String: Any]) -> Bool {
        ["completed", "cancelled", "failed"].contains(status["state"] as? String ?? "")
    }

    /// Whether `coordinator` has logged completing campaign `id` (at `info`).
    static func completed(_ id: UUID, by coordinator: PushFleetProcess) -> Bool {
        coordinator.standardError.split(separator: "\n").contains { $0.contains("campaign completed") && $0.contains(id.uuidString) }
    }

    /// Returns once `coordinator` says it leads.
    static func waitUntilLeads(_ coordinator: PushFleetProcess) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while !Self.leads(coordinator) {
            guard ContinuousClock.now < deadline else { throw TestSupportError("the coordinator did not say it leads within 120 s") }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
