import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetTestSupport
import Testing

/// Launch converges: a launch that dies half way, and launches of one id at once, give exactly one
/// campaign, sent exactly.
extension PipelineTests {
    /// `launch` killed after it published to Redis but before Postgres said `running` leaves the
    /// campaign `pending` while workers may send it: the coordinator adopts it and it completes.
    @Test func aCampaignPublishedByALaunchThatDiedIsAdoptedAndCompletes() async throws {
        let fixture = try await PipelineFixture.start(count: 20_000)
        defer { Task { await fixture.stop() } }
        let id = try await fixture.launch(protocol: "http2")
        // The state that launch leaves when it dies between its last two steps.
        #expect(try await fixture.withStore { try await $0.setState(id, to: .pending, from: [.running]) })
        let workers = try (0..<2).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let coordinator = try fixture.startCoordinator()
        let status = try await fixture.waitForCompletion(id, limit: .seconds(600))
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: true)
        #expect(status["resent"] as? Int == 0)
        await stopAll(workers + [coordinator])
    }

    /// Two launches of one id at once, one of them failing on a bad last line after staging
    /// everything: one campaign, sent exactly. Before each launch staged under its own keys, the
    /// failing one deleted the winner's shards. (Now and then the good one has finished before the
    /// bad one starts, which then finds the campaign and changes nothing.)
    @Test func concurrentLaunchesOfOneIdGiveOneExactCampaign() async throws {
        let fixture = try await PipelineFixture.start(count: 20_000)
        defer { Task { await fixture.stop() } }
        let bad = NSTemporaryDirectory() + "pushfleet-audience-bad-\(UUID().uuidString).txt"
        try (fixture.tokens.map(\.hexString) + ["not a token"]).joined(separator: "\n").write(toFile: bad, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: bad) }
        let id = UUID()
        func launch(_ file: String) async throws -> (status: Int32, output: String, error: String) {
            try await PushFleetProcess.run(
                ["launch", "--topic", fixture.topic, "--protocol", "http2", "--tokens", file, "--campaign-id", id.uuidString,
                 "--payload", #"{"aps":{"alert":"hi"}}"#] + fixture.stateArguments
            )
        }
        async let good = launch(fixture.tokenFile)
        async let failing = launch(bad)
        let (ok, refused) = try await (good, failing)
        #expect(ok.status == 0, "\(ok.error)")
        if refused.status == 0 {
            // The good launch had made the campaign before the bad one looked: an existing id is
            // left as it is, whatever file comes with it (launch is idempotent by id).
            #expect(refused.error.contains("exists already; nothing changed"), "\(refused.error)")
        } else {
            #expect(refused.error.contains("\(bad):\(fixture.tokens.count + 1):"), "\(refused.error)")
        }

        let workers = try (0..<2).map { _ in try fixture.startHTTP2Worker(.providerToken) }
        let coordinator = try fixture.startCoordinator()
        let status = try await fixture.waitForCompletion(id, limit: .seconds(600))
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: true)
        #expect(status["resent"] as? Int == 0)
        await stopAll(workers + [coordinator])
    }
}
