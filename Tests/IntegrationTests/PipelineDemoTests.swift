import Foundation
import PushFleetTestSupport
import Testing

extension PipelineTests {
    /// `pushfleet demo --doorbell`, the README's main job, on both protocols: a campaign through a
    /// coordinator, two workers, `pushfleet api` (each a process of the demo's) and the bundled
    /// simulator, with a doorbell rung every second by `POST /v1/notify`. The demo reconciles the
    /// simulator's ledger with Postgres and exits 1 unless every token is accounted for exactly and
    /// every ring reached each of the six phones once.
    @Test(arguments: ["http2", "binary"])
    func theDemoWithItsDoorbellReconcilesExactly(_ protocol: String) async throws {
        let result = try await PushFleetProcess.run(
            ["demo", "--doorbell", "--tokens", "50000", "--protocol", `protocol`, "--workers", "2", "--connections", "2",
             "--invalid-percent", "0.2", "--unregistered-percent", "0.2", "--error-delay-ms", "20",
             "--certs", try TestCertificates.shared().directory,
             "--redis", try IntegrationEnvironment.redisURL(), "--postgres", try IntegrationEnvironment.pipelinePostgresURL()]
        )
        #expect(result.status == 0, "\(result.output.suffix(2_000))\n\(result.error.suffix(3_000))")
        let lines = result.output.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("✔ exact") }, "\(result.output.suffix(2_000))")
        let rings = try #require(lines.first { $0.hasPrefix("doorbell: ") }, "no doorbell summary: \(result.output.suffix(2_000))")
        #expect(rings.hasSuffix("(each ring exactly once)"), "\(rings)")
    }

    /// The demo's processes logging everything (`PUSHFLEET_LOG_LEVEL=trace`, passed on to them)
    /// write far more than a pipe holds. The demo reads their standard error as it comes: unread,
    /// each would block in its next write and the campaign would never end.
    @Test func theDemoEndsWhileItsProcessesLogEverything() async throws {
        let demo = try PushFleetProcess(
            ["demo", "--tokens", "20000", "--protocol", "binary", "--workers", "2", "--connections", "2", "--error-delay-ms", "20",
             "--certs", try TestCertificates.shared().directory,
             "--redis", try IntegrationEnvironment.redisURL(), "--postgres", try IntegrationEnvironment.pipelinePostgresURL()],
            environment: ["PUSHFLEET_LOG_LEVEL": "trace"]
        )
        let began = ContinuousClock.now
        while demo.isRunning && ContinuousClock.now - began < .seconds(300) { try await Task.sleep(for: .milliseconds(100)) }
        let ended = !demo.isRunning
        if !ended { demo.signal(SIGKILL) }  // its children end with it (PUSHFLEET_EXIT_WITH_PARENT)
        let status = await demo.wait()
        #expect(ended, "the demo had not ended after 300 s: \(demo.standardOutput.suffix(2_000))")
        #expect(status == 0, "\(demo.standardOutput.suffix(2_000))\n\(demo.standardError.suffix(3_000))")
        #expect(demo.standardOutput.split(separator: "\n").contains { $0.hasPrefix("✔ exact") }, "\(demo.standardOutput.suffix(2_000))")
    }
}
