import APNSTransport
import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import PushFleetCore
import PushFleetTestSupport
import Testing

/// ``HTTP2Sender``'s connections against a scripted server: stream limits, GOAWAY, token expiry,
/// timeouts, back-pressure and shutdown.
@Suite struct HTTP2SenderConnectionTests {
    @Test func opensOneStreamUntilTheServerGrantsMore() async throws {
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 1) { request in
            // The first answer comes with a larger limit, as APNs does after the first valid token.
            request.streamID == 1 ? [.settings(maxConcurrentStreams: 8), .respond(status: 200)] : [.respond(status: 200, after: .milliseconds(5))]
        }
        defer { Task { await server.stop() } }
        let (outcomes, _) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(100), with: try HTTP2SenderFixture.configuration(server))

        #expect(outcomes.accepted.count == 100)
        #expect(server.requests.count == 100)  // none refused and sent again
        let peak = server.peakInFlight[0] ?? 0
        #expect(peak <= 8)
        #expect(peak > 1)
    }

    /// APNs varies its stream limit with its load. A limit lowered below the streams open holds
    /// from the moment the client reads it: the server refuses a stream above its limit once the
    /// client acknowledged the SETTINGS, and a refused stream is written again, so none may be. A
    /// limit of 0 holds new streams without closing the connection, until it rises again.
    @Test(arguments: [(2, nil), (0, 10)] as [(Int, Int?)])
    func aStreamLimitLoweredMidConnectionIsKeptFromThen(_ lowered: Int, raisedLater: Int?) async throws {
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 10) { request in
            let answer = HTTP2ScriptedServer.Action.respond(status: 200, after: .milliseconds(20))
            guard request.connection == 0 && request.streamID == 9 else { return [answer] }
            let raise = raisedLater.map { [HTTP2ScriptedServer.Action.settings(maxConcurrentStreams: $0, after: .milliseconds(300))] } ?? []
            return [.settings(maxConcurrentStreams: lowered)] + raise + [answer]
        }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(60), with: try HTTP2SenderFixture.configuration(server))

        #expect(outcomes.accepted.count == 60 && outcomes.rejected.isEmpty)
        #expect(Set(outcomes.accepted.map(\.tag)).count == 60)
        #expect(server.requests.count == 60)
        #expect(statistics.requestsWritten == 60)
        #expect(statistics.resentUnprocessed == 0 && statistics.resentAfterConnectionLoss == 0)
        #expect(statistics.requestTimeouts == 0)
        #expect(server.connections == 1)
        #expect((server.peakInFlight[0] ?? 0) > 2, "the limit was never above 2 in use: the test proves nothing")
    }

    /// Stream ids are 31 bits and never reused: a connection that used the last one is replaced,
    /// and nothing is sent twice. (2^30 requests take some 15 hours at APNs' pace; here the last id
    /// is 21.)
    @Test func aConnectionWhoseStreamIDsRanOutIsReplaced() async throws {
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 10) { _ in [.respond(status: 200, after: .milliseconds(5))] }
        defer { Task { await server.stop() } }
        var configuration = try HTTP2SenderFixture.configuration(server)
        configuration.streamIDLimit = 21
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(40), with: configuration)

        #expect(outcomes.accepted.count == 40 && Set(outcomes.accepted.map(\.tag)).count == 40)
        #expect(server.requests.count == 40 && server.requests.allSatisfy { $0.streamID <= 21 })
        #expect(server.connections == 4)  // 11 streams on each of three, 7 on the fourth
        #expect(statistics.connectionsReplaced == 3)
        #expect(statistics.requestsWritten == 40 && statistics.resentAfterConnectionLoss == 0 && statistics.resentUnprocessed == 0)
    }

    @Test func goAwayResendsTheStreamsAboveTheLastIDOnANewConnectionOnce() async throws {
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 10) { request in
            guard request.connection == 0 else { return [.respond(status: 200)] }
            switch request.streamID {
            case 1, 3: return [.respond(status: 200, after: .milliseconds(300))]  // below the last id: finish later
            case 7: return [.goAway(lastStreamID: 3, reason: "Shutdown")]
            default: return []  // never answered on this connection
            }
        }
        defer { Task { await server.stop() } }
        let notifications = HTTP2SenderFixture.notifications(30)
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(notifications, with: try HTTP2SenderFixture.configuration(server))

        #expect(outcomes.accepted.count == 30 && outcomes.rejected.isEmpty)
        #expect(Set(outcomes.accepted.map(\.tag)).count == 30)
        let requests = server.requests
        let onFirst = requests.filter { $0.connection == 0 }
        let answeredOnFirst = Set(onFirst.filter { $0.streamID <= 3 }.map(\.token))
        let unprocessed = onFirst.filter { $0.streamID > 3 }.map(\.token)
        #expect(answeredOnFirst.count == 2)
        // Each unprocessed one went again exactly once, on another connection; the answered ones did not.
        for token in unprocessed {
            #expect(requests.filter { $0.token == token && $0.connection > 0 }.count == 1)
        }
        for token in answeredOnFirst {
            #expect(requests.filter { $0.token == token }.count == 1)
        }
        #expect(statistics.goAways == 1)
        #expect(statistics.lastGoAwayReason == "Shutdown")
        #expect(statistics.resentUnprocessed >= unprocessed.count)
        #expect(statistics.resentAfterConnectionLoss == 0)
        #expect(statistics.connectionsOpened == 2)
    }

    @Test func expiredProviderTokenRenewsOnceAndReplacesTheConnection() async throws {
        let first = NIOLockedValueBox<String?>(nil)
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 5) { request in
            let expired = first.withLockedValue { first in
                if first == nil { first = request.authorization }
                return first == request.authorization
            }
            return expired ? [.respond(status: 403, reason: "ExpiredProviderToken")] : [.respond(status: 200)]
        }
        defer { Task { await server.stop() } }
        let signer = try HTTP2SenderFixture.signer()
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(
            HTTP2SenderFixture.notifications(20), with: try HTTP2SenderFixture.configuration(server, signer: signer)
        )

        #expect(outcomes.accepted.count == 20 && outcomes.rejected.isEmpty)
        #expect(signer.tokensSigned == 2)
        #expect(statistics.providerTokensSigned == 2)
        #expect(statistics.connectionsOpened == 2)
        #expect(statistics.connectionsReplaced == 1)
        let requests = server.requests
        #expect(Set(requests.map(\.authorization)).count == 2)
        #expect(requests.filter { $0.connection == 1 }.allSatisfy { $0.authorization != requests[0].authorization })
    }

    @Test func anOverdueAnswerMovesTheConnectionsStreamsToANewOne() async throws {
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 10) { request in
            request.connection == 0 ? [] : [.respond(status: 200)]
        }
        defer { Task { await server.stop() } }
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(
            HTTP2SenderFixture.notifications(15), with: try HTTP2SenderFixture.configuration(server, requestTimeout: .milliseconds(500))
        )
        #expect(outcomes.accepted.count == 15)
        // A loaded machine may time out a later connection too; the first one certainly was.
        #expect(statistics.requestTimeouts >= 1)
        let requests = server.requests
        let sentOnFirst = requests.filter { $0.connection == 0 }
        #expect(!sentOnFirst.isEmpty)
        #expect(statistics.resentAfterConnectionLoss >= sentOnFirst.count)
        for request in sentOnFirst {
            #expect(requests.contains { $0.token == request.token && $0.connection > 0 })
        }
    }

    @Test func sendSuspendsWhileTooManyWaitAndShutdownReturnsTheUnanswered() async throws {
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 2) { _ in [] }  // never answers
        defer { Task { await server.stop() } }
        let (sender, outcomes) = try HTTP2SenderFixture.sender(try HTTP2SenderFixture.configuration(server, maximumQueued: 5))
        let notifications = HTTP2SenderFixture.notifications(12)
        try await sender.send(Array(notifications.prefix(4)))  // under the limit: returns
        let returned = NIOLockedValueBox(false)
        let blocked = Task {
            defer { returned.withLockedValue { $0 = true } }
            try await sender.send(Array(notifications.dropFirst(4)))
        }
        // Two streams at most can be open, so at least six stay queued: send must still be waiting.
        try await Task.sleep(for: .milliseconds(300))
        #expect(returned.withLockedValue { $0 } == false)

        let unanswered = await sender.shutdown()
        #expect(Set(unanswered.map(\.tag)) == Set(0..<12))
        #expect(unanswered.count == 12)
        await #expect(throws: TransportError.self) { try await blocked.value }
        #expect(await outcomes.value.accepted.isEmpty)
    }

    @Test func shutdownReturnsOnlyTheUnanswered() async throws {
        let server = try await HTTP2ScriptedServer.start { request in
            (request.streamID / 2) % 2 == 0 ? [.respond(status: 200)] : []
        }
        defer { Task { await server.stop() } }
        // The unanswered stay unanswered until the shutdown: on a loaded machine the waits below can
        // outlast the usual 10 s answer timeout, which would give the connection up and send them
        // again on streams this server does answer.
        let (sender, outcomes) = try HTTP2SenderFixture.sender(try HTTP2SenderFixture.configuration(server, requestTimeout: .hours(1)))
        let notifications = HTTP2SenderFixture.notifications(20)
        try await sender.send(notifications)
        // Wait until every request has reached the server.
        while server.requests.count < 20 { try await Task.sleep(for: .milliseconds(10)) }
        let answeredTokens = Set(server.requests.filter { ($0.streamID / 2) % 2 == 0 }.map(\.token))
        while await sender.statistics().accepted < answeredTokens.count { try await Task.sleep(for: .milliseconds(10)) }
        let unanswered = await sender.shutdown()
        let accepted = await outcomes.value.accepted
        #expect(accepted.count + unanswered.count == 20)
        #expect(Set(accepted.map { notifications[Int($0.tag)].token.hexString }) == answeredTokens)
        #expect(Set(unanswered.map(\.token.hexString)).isDisjoint(with: answeredTokens))
    }
}
