import APNSMockServer
import Foundation
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A throttled campaign (`launch --rate`) through three workers, on either protocol: one worker
/// is killed along the way (it held no share of the fleet's rate, so nothing is lost or stuck),
/// the limit is raised with `campaign set-rate` while it runs, and the campaign completes exactly.
/// How closely the fleet keeps to the rate is measured by `scripts/bench.sh --rate`, not here.
extension PipelineTests {
    static let throttledCount = 12_000

    @Test(arguments: ["binary", "http2"])
    func aThrottledCampaignCompletesExactlyThroughAKillAndARateChange(protocol: String) async throws {
        let http2 = `protocol` == "http2"
        let fixture = try await PipelineFixture.start(count: Self.throttledCount)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        var workers = try (0..<3).map { _ in try fixture.startWorker(protocol: `protocol`) }
        let id = try await fixture.launch(["--rate", "1500"], protocol: `protocol`)

        let early = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= Self.throttledCount / 4 }
        #expect(early["rate_limit"] as? Int == 1_500)
        workers[0].signal(SIGKILL)
        await workers[0].wait()
        workers[0] = try fixture.startWorker(protocol: `protocol`)

        let raised = try await PushFleetProcess.run(["campaign", "set-rate", id.uuidString, "3000"] + fixture.stateArguments)
        #expect(raised.status == 0, "\(raised.error)")
        let status = try await fixture.waitForCompletion(id)
        #expect(status["rate_limit"] as? Int == 3_000)
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: http2)

        // Nothing left to throttle: the command refuses, naming the state.
        let late = try await PushFleetProcess.run(["campaign", "set-rate", id.uuidString, "10"] + fixture.stateArguments)
        #expect(late.status != 0)
        #expect(late.error.contains("completed"), "\(late.error)")
        await stopAll(workers + [coordinator])
    }
}
