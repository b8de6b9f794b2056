import APNSTransport
import APNSWire
import NIOCore
import NIOHPACK
import NIOHTTP2
import PushFleetCore
import PushFleetTestSupport
import Testing

/// ``HTTP2Sender`` against a scripted HTTP/2 server over real TLS: what each kind of answer becomes.
@Suite struct HTTP2SenderTests {
    @Test func acceptedWithProviderTokenCarriesTheSameAuthorizationOnEveryRequest() async throws {
        let server = try await HTTP2ScriptedServer.start { _ in [.respond(status: 200)] }
        defer { Task { await server.stop() } }
        let notifications = HTTP2SenderFixture.notifications(200)
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(notifications, with: try HTTP2SenderFixture.configuration(server))

        #expect(Set(outcomes.accepted.map(\.tag)) == Set(0..<200))
        #expect(outcomes.rejected.isEmpty)
        let requests = server.requests
        #expect(requests.count == 200)
        #expect(Set(requests.map(\.token)) == Set(notifications.map(\.token.hexString)))
        let authorizations = Set(requests.map(\.authorization))
        #expect(authorizations.count == 1)
        #expect(authorizations.first??.hasPrefix("bearer ey") == true)
        let headers = requests[0].headers
        #expect(headers.first(name: ":method") == "POST")
        #expect(headers.first(name: "apns-topic") == "com.example.app")
        #expect(headers.first(name: "apns-push-type") == "alert")
        #expect(String(buffer: requests[0].body) == #"{"aps":{"alert":"hi"}}"#)
        #expect(statistics.accepted == 200 && statistics.requestsWritten == 200)
        #expect(statistics.providerTokensSigned == 1)
        #expect(statistics.connectionsOpened == 1)
    }

    @Test func certificateAuthenticationSendsNoAuthorization() async throws {
        let server = try await HTTP2ScriptedServer.start(requireClientCertificate: true) { _ in [.respond(status: 200)] }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(
            HTTP2SenderFixture.notifications(20), with: try HTTP2SenderFixture.configuration(server, certificate: true)
        )
        #expect(outcomes.accepted.count == 20)
        #expect(server.requests.count == 20)
        #expect(server.requests.allSatisfy { $0.authorization == nil })
        #expect(statistics.providerTokensSigned == 0)
    }

    @Test func finalRejectionsCarryStatusReasonAndTimestamp() async throws {
        let notifications = HTTP2SenderFixture.notifications(7)
        let answers: [String: (Int, String?, Int64?)] = [
            notifications[0].token.hexString: (400, "BadDeviceToken", nil),
            notifications[1].token.hexString: (403, "Forbidden", nil),
            notifications[2].token.hexString: (404, "BadPath", nil),
            notifications[3].token.hexString: (405, "MethodNotAllowed", nil),
            notifications[4].token.hexString: (410, "Unregistered", 1_700_000_000_123),
            notifications[5].token.hexString: (413, "PayloadTooLarge", nil),
        ]
        let server = try await HTTP2ScriptedServer.start { request in
            guard let (status, reason, timestamp) = answers[request.token] else { return [.respond(status: 200)] }
            return [.respond(status: status, reason: reason, timestamp: timestamp)]
        }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(notifications, with: try HTTP2SenderFixture.configuration(server))

        #expect(outcomes.accepted.map(\.tag) == [6])
        #expect(outcomes.rejection(of: notifications[0].token) == .rejected(.badDeviceToken))
        #expect(outcomes.rejection(of: notifications[1].token) == .refused(.forbidden, status: 403))
        #expect(outcomes.rejection(of: notifications[2].token) == .refused(.badPath, status: 404))
        #expect(outcomes.rejection(of: notifications[3].token) == .refused(.methodNotAllowed, status: 405))
        #expect(outcomes.rejection(of: notifications[4].token) == .rejected(.unregistered, timestamp: 1_700_000_000_123))
        #expect(outcomes.rejection(of: notifications[5].token) == .rejected(.payloadTooLarge))
        #expect(server.requests.count == 7)  // final: none sent twice
        #expect(statistics.rejected == 6 && statistics.retries == 0)
    }

    @Test func tooManyRequestsRetriesThatTokenOnly() async throws {
        let notifications = HTTP2SenderFixture.notifications(30)
        let throttled = notifications[7].token.hexString
        let counter = ScriptCounter()
        let server = try await HTTP2ScriptedServer.start { request in
            if request.token == throttled, counter.next(throttled) <= 2 { return [.respond(status: 429, reason: "TooManyRequests")] }
            return [.respond(status: 200)]
        }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(notifications, with: try HTTP2SenderFixture.configuration(server))

        #expect(outcomes.accepted.count == 30 && outcomes.rejected.isEmpty)
        let perToken = Dictionary(grouping: server.requests, by: \.token).mapValues(\.count)
        #expect(perToken[throttled] == 3)
        #expect(perToken.filter { $0.key != throttled }.values.allSatisfy { $0 == 1 })
        #expect(statistics.tooManyRequests == 2 && statistics.retries == 2)
        #expect(statistics.connectionsOpened == 1)
    }

    @Test func serviceUnavailableIsRetriedAndCounted() async throws {
        let notifications = HTTP2SenderFixture.notifications(10)
        let unlucky = notifications[3].token.hexString
        let counter = ScriptCounter()
        let server = try await HTTP2ScriptedServer.start { request in
            if request.token == unlucky, counter.next(unlucky) <= 2 { return [.respond(status: 503, reason: "ServiceUnavailable")] }
            return [.respond(status: 200)]
        }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(notifications, with: try HTTP2SenderFixture.configuration(server))

        #expect(outcomes.accepted.count == 10 && outcomes.rejected.isEmpty)
        #expect(server.requests.filter { $0.token == unlucky }.count == 3)
        #expect(statistics.retries == 2 && statistics.accepted == 10)
    }

    /// A gateway that resets one request's stream every time (a server that finds a header of it
    /// malformed, say), or refuses it every time, and answers the others: each reset is an
    /// attempt, and once they are used up the notification has its final outcome, a rejection of
    /// its own (`StreamReset`), never sent forever. The others are accepted once.
    @Test(arguments: [HTTP2ErrorCode.protocolError, .refusedStream])
    func aRequestResetEveryTimeRunsOutOfAttempts(_ code: HTTP2ErrorCode) async throws {
        let notifications = HTTP2SenderFixture.notifications(10)
        let poisoned = notifications[3].token.hexString
        let server = try await HTTP2ScriptedServer.start { request in
            request.token == poisoned ? [.reset(code)] : [.respond(status: 200, after: .milliseconds(5))]
        }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(
            notifications, with: try HTTP2SenderFixture.configuration(server, maximumAttempts: 4)
        )
        #expect(outcomes.accepted.count == 9 && Set(outcomes.accepted.map(\.tag)).count == 9)
        #expect(outcomes.rejection(of: notifications[3].token) == .rejected(.streamReset))
        #expect(server.requests.filter { $0.token == poisoned }.count == 4)
        #expect(server.requests.count == 13)
        #expect(statistics.retries == 3 && statistics.rejected == 1)
        // Every reset after the request was sent may have been processed: a possible duplicate.
        #expect(code == .refusedStream ? statistics.resentUnprocessed == 4 : statistics.resentAfterConnectionLoss == 4)
    }

    /// A request that makes the gateway drop the connection every time, while another connection
    /// is answered: each loss is an attempt, and the request ends rejected on its own
    /// (`ConnectionLost`). One stream a connection, so that a loss takes no other request along.
    /// The others take the connections more than a second in all (119 at 20 ms, one at a time on
    /// each), so that answers keep coming after the first loss even when the poisoned request's
    /// event loop is starved meanwhile: with none since it, the losses would be the gateway's, and
    /// the request refused as an outage (as CI once saw, under the load of phase 1, with 19
    /// answered in 5 ms each).
    @Test func aRequestThatDropsTheConnectionEveryTimeRunsOutOfAttempts() async throws {
        let notifications = HTTP2SenderFixture.notifications(120)
        let poisoned = notifications[3].token.hexString
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 1) { request in
            // The close a little later, so that the other connection answers meanwhile.
            request.token == poisoned ? [.close(after: .milliseconds(30))] : [.respond(status: 200, after: .milliseconds(20))]
        }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(
            notifications, with: try HTTP2SenderFixture.configuration(port: server.port, connections: 2, maximumAttempts: 4)
        )
        #expect(Set(outcomes.accepted.map(\.tag)) == Set((0..<120).filter { $0 != 3 }.map(UInt64.init)))
        #expect(outcomes.rejection(of: notifications[3].token) == .rejected(.connectionLost))
        #expect(server.requests.filter { $0.token == poisoned }.count == 4)
        #expect(server.requests.count == 123)
        #expect(statistics.rejected == 1 && statistics.resentAfterConnectionLoss == 4)
    }

    /// A gateway that answers nothing (it hangs): every attempt times out, and with no answer on
    /// any connection meanwhile the notifications are refused as an outage (a campaign pauses
    /// until APNs heals), never rejected as if the tokens were at fault, never sent forever.
    /// How many attempts go before the refusal depends on how the timeouts and reconnects fall
    /// (under phase 1's load CI saw 7 requests, not 9): each token is sent at most
    /// `maximumAttempts` times, and every request sent is counted as possibly delivered.
    @Test func aGatewayThatAnswersNothingIsAnOutage() async throws {
        let notifications = HTTP2SenderFixture.notifications(3)
        let server = try await HTTP2ScriptedServer.start { _ in [] }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(
            notifications, with: try HTTP2SenderFixture.configuration(server, maximumAttempts: 3, requestTimeout: .milliseconds(300))
        )
        #expect(outcomes.accepted.isEmpty)
        for notification in notifications {
            #expect(outcomes.rejection(of: notification.token) == .refused(.connectionLost, status: 0))
        }
        let sent = Dictionary(grouping: server.requests, by: \.token)
        #expect(sent.count == 3 && sent.values.allSatisfy { (1...3).contains($0.count) }, "\(sent.mapValues(\.count))")
        #expect(statistics.requestTimeouts >= 1)
        // The server may not have read a request before the client gave its connection up.
        #expect(statistics.resentAfterConnectionLoss >= server.requests.count && statistics.resentAfterConnectionLoss <= 9, "\(statistics)")
    }

    @Test func retriesRunOutIntoARejectionWithAPNsReason() async throws {
        let server = try await HTTP2ScriptedServer.start { _ in [.respond(status: 500, reason: "InternalServerError")] }
        defer { Task { await server.stop() } }
        let notifications = HTTP2SenderFixture.notifications(1)
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(
            notifications, with: try HTTP2SenderFixture.configuration(server, maximumAttempts: 3)
        )
        #expect(outcomes.accepted.isEmpty)
        #expect(outcomes.rejection(of: notifications[0].token) == .refused(.internalServerError, status: 500))
        #expect(server.requests.count == 3)
        #expect(statistics.retries == 2 && statistics.rejected == 1)
        // Three 500s in a row on one connection: it is replaced.
        #expect(statistics.connectionsReplaced == 1)
    }
}
