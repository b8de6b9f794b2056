import APNSMockServer
import APNSWire
import Foundation
import PushFleetCore
import PushFleetTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The simulator's ledger over its admin HTTP port.
@Suite struct AdminEndpointTests {
    private func request(_ method: String, _ path: String, port: Int) async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
        request.httpMethod = method
        let (data, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
        return (status, object)
    }

    @Test func statsReportsTheLedgerAndResetClearsIt() async throws {
        let fixture = try await BinaryFixture.start(invalidTokens: [TestTokens.token(3)])
        defer { Task { await fixture.stop() } }
        let payload = try APSPayload(alert: .text("hi")).payload(for: .binaryFrame)
        var frames = FrameBuilder()
        frames.command2(1, token: TestTokens.token(1), payload: payload)
        frames.command2(2, token: TestTokens.token(2), payload: payload)
        frames.command2(3, token: TestTokens.token(3), payload: payload)
        _ = try await RawTLSClient.exchange(port: fixture.binaryPort, tls: try fixture.clientTLS(), bytes: frames.buffer)
        fixture.ledger.recordAccepted(TestTokens.token(1))  // a duplicate, recorded in-process

        let port = try #require(fixture.ports.admin)
        let (status, stats) = try await self.request("GET", "/stats", port: port)
        #expect(status == 200)
        #expect(stats["accepted"] as? Int == 3)
        #expect(stats["distinct_tokens"] as? Int == 2)
        #expect(stats["duplicated_tokens"] as? Int == 1)
        #expect(stats["duplicate_deliveries"] as? Int == 1)
        #expect((stats["rejected"] as? [String: Any])?["InvalidToken"] as? Int == 1)
        #expect((stats["connections"] as? [String: Any])?["binary"] as? Int == 1)

        let (resetStatus, _) = try await self.request("POST", "/reset", port: port)
        #expect(resetStatus == 200)
        let (_, after) = try await self.request("GET", "/stats", port: port)
        #expect(after["accepted"] as? Int == 0)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(1)) == 0)

        let (missing, _) = try await self.request("GET", "/nope", port: port)
        #expect(missing == 404)
    }

    /// An APNs outage switched on and off from outside: meanwhile every HTTP/2 request is answered
    /// 503 and nothing is delivered.
    @Test func outageAnswersEveryHTTP2RequestUntilItIsSwitchedOff() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let port = try #require(fixture.ports.admin)
        let configuration = try HTTP2SenderFixture.configuration(port: fixture.ports.http2!, certificate: true, maximumAttempts: 1)

        #expect(try await self.request("POST", "/outage?status=418", port: port).0 == 400)
        #expect(fixture.server.outage.status == nil)
        let (on, body) = try await self.request("POST", "/outage?status=503", port: port)
        #expect(on == 200 && body["outage"] as? Int == 503)
        let (during, _) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(3), with: configuration)
        #expect(during.accepted.isEmpty)
        #expect(during.rejected.map(\.1) == Array(repeating: HTTP2Outcomes.Answer.refused(.serviceUnavailable, status: 503), count: 3))
        #expect(fixture.ledger.snapshot().accepted == 0)

        #expect(try await self.request("DELETE", "/outage", port: port).0 == 200)
        let (after, _) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(3), with: configuration)
        #expect(after.accepted.count == 3)
        #expect(fixture.ledger.snapshot().accepted == 3)
    }
}
