import APNSMockServer
import Foundation
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A gateway the workers cannot use at all must not leave a campaign `running` with nothing sent,
/// over either protocol. A certificate the gateway refuses (expired, revoked, from another CA) is
/// the operator's to fix: the campaign pauses with the TLS failure and waits for `campaign resume`.
/// A gateway that cannot be reached is an outage: the campaign pauses with the reason and the
/// coordinator resumes it by itself until it gets through. Either way nothing is counted as a
/// token's outcome, and the campaign completes exactly once the gateway can be used.
extension PipelineTests {
    @Test(arguments: ["binary", "http2"])
    func aGatewayThatRefusesTheCertificatePausesTheCampaign(_ wire: String) async throws {
        let fixture = try await PipelineFixture.start(count: 20_000)
        defer { Task { await fixture.stop() } }
        let certificates = fixture.mock.certificates
        let rogue = ["--ca", certificates.caCertificate, "--cert", certificates.rogueClientCertificate, "--key", certificates.rogueClientKey]
        let coordinator = try fixture.startCoordinator()
        let refused = try wire == "http2" ? fixture.startHTTP2Worker(.certificate, tls: rogue) : fixture.startWorker(tls: rogue)
        let id = try await fixture.launch(protocol: wire)

        let paused = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "paused" }
        let reason = paused["reason"] as? String ?? ""
        #expect(reason.contains("TLSFailure"), "\(paused)")
        #expect(reason.contains("sent TLS alert"), "\(paused)")
        #expect(paused["resumes_at"] is NSNull, "a refused certificate is no outage: it waits for the operator: \(paused)")
        refused.signal(SIGTERM)
        #expect(await refused.wait() == 0)
        let stopped = try await fixture.status(id)
        #expect(stopped["rejected"] as? [String: Int] == [:], "a refused certificate is no token's outcome")
        #expect(stopped["accepted"] as? Int == 0)
        #expect(fixture.mock.ledger.snapshot().accepted == 0)

        let worker = try wire == "http2" ? fixture.startHTTP2Worker(.certificate) : fixture.startWorker()
        let resumed = try await PushFleetProcess.run(["campaign", "resume", id.uuidString] + fixture.stateArguments)
        #expect(resumed.status == 0, "\(resumed.error)")
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(status["reason"] is NSNull)
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: wire == "http2")
        await stopAll([worker, coordinator])
    }

    @Test(arguments: ["binary", "http2"])
    func aGatewayThatCannotBeReachedPausesTheCampaignUntilItCanBe(_ wire: String) async throws {
        let fixture = try await PipelineFixture.start(count: 20_000)
        defer { Task { await fixture.stop() } }
        // Every connection closed as it arrives, as a gateway that is down.
        let gateway = try await OutageProxy.start(port: wire == "http2" ? fixture.mock.ports.http2! : fixture.mock.binaryPort)
        defer { Task { await gateway.stop() } }
        gateway.cut()
        let coordinator = try fixture.startCoordinator(["--outage-resume-s", "2"])
        let worker = try wire == "http2" ? fixture.startHTTP2Worker(.providerToken, port: gateway.port) : fixture.startWorker(port: gateway.port)
        let id = try await fixture.launch(protocol: wire)

        let paused = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "paused" }
        let reason = paused["reason"] as? String ?? ""
        #expect(reason.contains("CannotConnect"), "\(paused)")
        #expect(reason.contains("cannot connect to 127.0.0.1:\(gateway.port)"), "\(paused)")
        #expect(paused["resumes_at"] is String, "an unreachable gateway is an outage, resumed by itself: \(paused)")
        #expect(paused["rejected"] as? [String: Int] == [:], "no token's outcome")
        gateway.restore()

        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(status["reason"] is NSNull)
        #expect(status["resumes_at"] is NSNull)
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: wire == "http2")
        await stopAll([worker, coordinator])
    }

    /// The gateway going down mid-campaign: its connections drop, what they had unconfirmed may
    /// have been delivered (counted in `resent`), and once reconnecting fails the campaign pauses
    /// as an outage with the shards given back, what was delivered above their marks with them.
    /// Back up, the campaign completes: every token once, each duplicate counted.
    @Test(arguments: ["binary", "http2"])
    func aGatewayThatGoesDownMidCampaignPausesItAndLosesNothing(_ wire: String) async throws {
        let fixture = try await PipelineFixture.start(count: 50_000)
        defer { Task { await fixture.stop() } }
        let gateway = try await OutageProxy.start(port: wire == "http2" ? fixture.mock.ports.http2! : fixture.mock.binaryPort)
        defer { Task { await gateway.stop() } }
        let coordinator = try fixture.startCoordinator(["--outage-resume-s", "2"])
        let worker = try wire == "http2" ? fixture.startHTTP2Worker(.providerToken, port: gateway.port) : fixture.startWorker(port: gateway.port)
        // Throttled, so that most of the campaign is still to send when the gateway goes down.
        let id = try await fixture.launch(["--rate", "4000"], protocol: wire)
        _ = try await fixture.waitForStatus(id) { ($0["accepted"] as? Int ?? 0) >= 5_000 }

        gateway.cut()
        let paused = try await fixture.waitForStatus(id, limit: .seconds(300)) { $0["state"] as? String == "paused" }
        #expect(paused["resumes_at"] is String, "a gateway that went down is an outage, resumed by itself: \(paused)")
        gateway.restore()

        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(status["reason"] is NSNull)
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: wire == "http2")
        let rejected = (status["rejected"] as? [String: Int] ?? [:]).values.reduce(0, +)
        #expect((status["accepted"] as? Int ?? 0) + rejected == fixture.tokens.count, "accepted + rejected is not the total")
        await stopAll([worker, coordinator])
    }
}
