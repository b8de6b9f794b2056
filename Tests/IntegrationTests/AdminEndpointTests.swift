import APNSMockServer
import APNSWire
import Foundation
import NIOCore
import PushFleetCore
import PushFleetTestSupport
import Synchronization
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

    /// A stall switched on and off from outside: meanwhile both gateways take and record what
    /// they are sent but answer nothing (an HTTP/2 request, a binary frame's error response);
    /// once it ends, every held answer goes out.
    @Test func stallHoldsEveryAnswerOfBothGatewaysUntilItEnds() async throws {
        let fixture = try await BinaryFixture.start(invalidTokens: [TestTokens.token(9)])
        defer { Task { await fixture.stop() } }
        let port = try #require(fixture.ports.admin)
        // The sender waits out any slowness of the test's (its requests held meanwhile), never
        // giving a request up while the stall holds its answer.
        let configuration = try HTTP2SenderFixture.configuration(
            port: fixture.ports.http2!, certificate: true, maximumAttempts: 1, requestTimeout: .seconds(600)
        )
        let (on, body) = try await self.request("POST", "/stall", port: port)
        #expect(on == 200 && body["stall"] as? Bool == true)

        let answered = Answered()
        let http2 = Task {
            defer { answered.mark("http2") }
            return try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(3), with: configuration).0
        }
        var frames = FrameBuilder()
        frames.command2(1, token: TestTokens.token(8), payload: try APSPayload(alert: .text("hi")).payload(for: .binaryFrame))
        frames.command2(2, token: TestTokens.token(9), payload: try APSPayload(alert: .text("hi")).payload(for: .binaryFrame))
        let tls = try fixture.clientTLS()
        let binary = Task {
            defer { answered.mark("binary") }
            return try await RawTLSClient.exchange(port: fixture.binaryPort, tls: tls, bytes: frames.buffer)
        }
        // Both gateways have taken everything: 3 HTTP/2 requests, 1 good frame (the bad one is
        // rejected by reason, not accepted).
        let start = ContinuousClock.now
        while fixture.ledger.snapshot().accepted < 4 || fixture.ledger.snapshot().rejected["InvalidToken"] == nil {
            try #require(ContinuousClock.now - start < .seconds(30), "the gateways never took the requests: \(fixture.ledger.snapshot())")
            try await Task.sleep(for: .milliseconds(10))
        }
        // Without the stall the answers would be back within milliseconds.
        try await Task.sleep(for: .milliseconds(500))
        #expect(answered.names.isEmpty, "answered during the stall: \(answered.names)")

        let (off, offBody) = try await self.request("DELETE", "/stall", port: port)
        #expect(off == 200 && offBody["stall"] as? Bool == false)
        let outcomes = try await http2.value
        #expect(outcomes.accepted.count == 3)
        let reply = try await binary.value
        // One error response: command 8, status 8 (invalid token), identifier 2.
        #expect(Array(reply.readableBytesView) == [8, 8, 0, 0, 0, 2])
        #expect(fixture.ledger.snapshot().accepted == 4)
    }
}

/// Which exchanges got their answers, in order.
private final class Answered: Sendable {
    private let answered = Mutex<[String]>([])

    func mark(_ name: String) { self.answered.withLock { $0.append(name) } }

    var names: [String] { self.answered.withLock { $0 } }
}
