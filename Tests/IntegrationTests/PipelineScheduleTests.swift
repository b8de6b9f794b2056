import APNSMockServer
import Foundation
import PushFleetTestSupport
import Testing

/// A campaign launched with `--at` a few seconds ahead, through two workers on either protocol:
/// `status` says `scheduled` with its start time until the coordinator starts it, and it then
/// completes exactly. The waiting itself is tested on an injected clock (`CoordinatorScheduleTests`).
extension PipelineTests {
    @Test(arguments: ["binary", "http2"])
    func aScheduledCampaignStartsAtItsTimeAndCompletesExactly(protocol: String) async throws {
        let fixture = try await PipelineFixture.start(count: 4_000)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }
        // Far enough ahead that the launch and the first status read happen before it.
        let startsAt = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 8).rounded(.up))
        let id = try await fixture.launch(["--at", startsAt.formatted(.iso8601)], protocol: `protocol`)

        let waiting = try await PushFleetProcess.run(["status", id.uuidString, "--json"] + fixture.stateArguments)
        let early = try #require(try JSONSerialization.jsonObject(with: Data(waiting.output.utf8)) as? [String: Any])
        #expect(early["starts_at"] as? String == startsAt.formatted(.iso8601))
        // Unless this machine took the whole lead to get here.
        if Date() < startsAt.addingTimeInterval(-1) {
            #expect(early["state"] as? String == "scheduled")
            #expect(early["accepted"] as? Int == 0)
        }
        let status = try await fixture.waitForCompletion(id)
        let started = try #require((status["started_at"] as? String).flatMap { try? Date($0, strategy: .iso8601) })
        #expect(started >= startsAt.addingTimeInterval(-1), "started \(started), scheduled for \(startsAt)")
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: `protocol` == "http2")
        await stopAll(workers + [coordinator])
    }
}
