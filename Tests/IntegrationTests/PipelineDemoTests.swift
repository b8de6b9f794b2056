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
}
