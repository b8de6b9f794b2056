import APNSMockServer
import Foundation
import PushFleetCore
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
        // 400 a second: some 30 s, so that the kill, the restart and the rate change all land
        // while it runs, even on a loaded machine.
        let id = try await fixture.launch(["--rate", "400"], protocol: `protocol`)

        let early = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= Self.throttledCount / 8 }
        #expect(early["rate_limit"] as? Int == 400)
        workers[0].signal(SIGKILL)
        await workers[0].wait()
        workers[0] = try fixture.startWorker(protocol: `protocol`)

        let raised = try await PushFleetProcess.run(["campaign", "set-rate", id.uuidString, "1200"] + fixture.stateArguments)
        #expect(raised.status == 0, "\(raised.error)")
        let status = try await fixture.waitForCompletion(id)
        #expect(status["rate_limit"] as? Int == 1_200)
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: http2)

        // Nothing left to throttle: the command refuses, naming the state.
        let late = try await PushFleetProcess.run(["campaign", "set-rate", id.uuidString, "10"] + fixture.stateArguments)
        #expect(late.status != 0)
        #expect(late.error.contains("completed"), "\(late.error)")
        await stopAll(workers + [coordinator])
    }

    /// A throttled campaign does not keep a worker's slots from the other campaigns of its topic:
    /// one worker's slots all take up a campaign throttled to 100 a second (100 shards: about
    /// 1,000 seconds of work), then a second, unthrottled, campaign is launched; it completes,
    /// exactly, while the throttled one has done a small part of its audience. Without the rule
    /// (`PacedCampaigns`) every slot stayed on the throttled campaign until its last shard was
    /// claimed, and the other waited for that.
    @Test(arguments: ["binary", "http2"])
    func aThrottledCampaignLeavesSlotsToTheOthers(protocol: String) async throws {
        let fixture = try await PipelineFixture.start(count: 10_000)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let worker = try fixture.startWorker(protocol: `protocol`)
        let slow = TestTokens.tokens(100_000, seed: UInt64.random(in: 1...UInt64.max))
        let file = NSTemporaryDirectory() + "pushfleet-throttled-\(UUID().uuidString).txt"
        try slow.map(\.hexString).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let launched = try await PushFleetProcess.run(
            ["launch", "--topic", fixture.topic, "--protocol", `protocol`, "--tokens", file, "--rate", "100",
             "--payload", #"{"aps":{"alert":"Slowly"}}"#] + fixture.stateArguments
        )
        try #require(launched.status == 0, "\(launched.error)")
        let throttled = try #require(UUID(uuidString: launched.output.trimmingCharacters(in: .whitespacesAndNewlines)))
        // Every slot has had time to take it up (the only campaign of the topic), and reads are paced.
        _ = try await fixture.waitForStatus(throttled) { ($0["accepted"] as? Int ?? 0) >= 300 }

        let other = try await fixture.launch(protocol: `protocol`)
        let status = try await fixture.waitForCompletion(other)
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: `protocol` == "http2")
        let meanwhile = try await fixture.status(throttled)
        #expect(meanwhile["state"] as? String == "running")
        #expect((meanwhile["accepted"] as? Int ?? .max) < slow.count / 2, "the other campaign waited for the throttled one: \(meanwhile)")
        let cancel = try await PushFleetProcess.run(["campaign", "cancel", throttled.uuidString] + fixture.stateArguments)
        #expect(cancel.status == 0, "\(cancel.error)")
        await stopAll([worker, coordinator])
    }
}
