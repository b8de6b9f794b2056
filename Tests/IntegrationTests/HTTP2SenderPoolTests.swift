import APNSMockServer
import APNSTransport
import APNSWire
import NIOCore
import PushFleetCore
import PushFleetTestSupport
import Testing

/// ``HTTP2Sender``'s pool and its care of idle connections: several connections opened
/// `connectionSpacing` apart, PING while idle, and APNs closing an idle connection.
@Suite struct HTTP2SenderPoolTests {
    typealias Gateway = HTTP2GatewayFixture

    @Test func workIsSpreadOverEveryConnectionOfThePool() async throws {
        // Slow answers keep streams open, so one connection's eight streams cannot carry it all.
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 8) { _ in [.respond(status: 200, after: .milliseconds(20))] }
        defer { Task { await server.stop() } }
        let configuration = try HTTP2SenderFixture.configuration(port: server.port, connections: 3)
        // At most 8 × 50 answers a second per connection: a few seconds of work, time enough for
        // every handshake of the pool even on a busy machine.
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(1200), with: configuration)

        #expect(outcomes.accepted.count == 1200 && outcomes.rejected.isEmpty)
        #expect(statistics.connectionsOpened == 3)
        let perConnection = Dictionary(grouping: server.requests, by: \.connection).mapValues(\.count)
        #expect(perConnection.keys.sorted() == [0, 1, 2])
        #expect(perConnection.values.reduce(0, +) == 1200)
        #expect(server.peakInFlight.values.allSatisfy { $0 <= 8 })
    }

    @Test func theNextConnectionWaitsForTheSpacing() async throws {
        // A spacing longer than the test: the first connection must do all the work alone, not
        // wait, and the pool must not open the others early.
        let server = try await HTTP2ScriptedServer.start(maxConcurrentStreams: 8) { _ in [.respond(status: 200)] }
        defer { Task { await server.stop() } }
        let configuration = try HTTP2SenderFixture.configuration(port: server.port, connections: 3, connectionSpacing: .hours(1))
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(100), with: configuration)

        #expect(outcomes.accepted.count == 100)
        #expect(statistics.connectionsOpened == 1)
        #expect(Set(server.requests.map(\.connection)) == [0])
    }

    @Test func anIdleConnectionIsPingedAndKept() async throws {
        let gateway = try await Gateway.start()
        defer { Task { await gateway.stop() } }
        let configuration = try HTTP2SenderFixture.configuration(port: gateway.port, certificate: true, idlePingInterval: .milliseconds(100))
        let (sender, outcomes) = try HTTP2SenderFixture.sender(configuration)
        try await sender.send(HTTP2SenderFixture.notifications(5))
        await sender.flush()
        try await Self.waitUntil { gateway.ledger.snapshot().pings >= 3 }
        try await sender.send(HTTP2SenderFixture.notifications(5, seed: 1))
        await sender.flush()
        let statistics = await sender.statistics()
        #expect(await sender.shutdown().isEmpty)

        #expect(await outcomes.value.accepted.count == 10)
        #expect(statistics.pings >= 3)
        #expect(statistics.connectionsOpened == 1)
        #expect(statistics.connectionsReplaced == 0)
        #expect(gateway.ledger.snapshot().connections == ["http2": 1])
    }

    @Test func aGoAwayForIdlenessIsFollowedByANewConnectionAndNothingIsSentTwice() async throws {
        let gateway = try await Gateway.start(idleTimeout: .seconds(2))
        defer { Task { await gateway.stop() } }
        let configuration = try HTTP2SenderFixture.configuration(port: gateway.port, certificate: true)
        let (sender, outcomes) = try HTTP2SenderFixture.sender(configuration)
        try await sender.send(HTTP2SenderFixture.notifications(5))
        await sender.flush()
        try await Self.waitUntil { gateway.ledger.snapshot().closes["idle-timeout"] == 1 }
        try await sender.send(HTTP2SenderFixture.notifications(5, seed: 1))
        await sender.flush()
        let statistics = await sender.statistics()
        #expect(await sender.shutdown().isEmpty)

        #expect(await outcomes.value.accepted.count == 10)
        let ledger = gateway.ledger.snapshot()
        #expect(ledger.accepted == 10 && ledger.duplicateDeliveries == 0)
        // On a busy machine the new connection may idle out too before its first request; the
        // client must cope with that as well, so only the lower bounds are exact.
        #expect(statistics.goAways >= 1)
        #expect(statistics.lastGoAwayReason == "IdleTimeout")
        #expect(statistics.connectionsOpened >= 2)
        #expect(statistics.accepted == 10 && statistics.rejected == 0)
    }

    /// The simulator's shutdown after 1,000 streams a connection, in one step (streams above the
    /// last id ignored, then GOAWAY) and in two (GOAWAY 2^31-1 and a PING, the streams already open
    /// still processed, then GOAWAY naming the last of them): each notification accepted once, a
    /// new connection after each shutdown. In two steps nothing is refused, so nothing is written
    /// twice at all. (The client closes a connection once its streams are answered, often before
    /// the second GOAWAY comes.)
    @Test(arguments: [false, true])
    func aGatewayShuttingConnectionsDownLosesNothingAndSendsNothingTwice(inTwoSteps: Bool) async throws {
        let count = 5_000
        let gateway = try await Gateway.start(maxConcurrentStreams: 100, faults: .init(goAwayAfter: 1_000, goAwayInTwoSteps: inTwoSteps))
        defer { Task { await gateway.stop() } }
        let configuration = try HTTP2SenderFixture.configuration(port: gateway.port, certificate: true, maximumQueued: count)
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(HTTP2SenderFixture.notifications(count), with: configuration)

        #expect(outcomes.accepted.count == count && Set(outcomes.accepted.map(\.tag)).count == count)
        let ledger = gateway.ledger.snapshot()
        #expect(ledger.accepted == count && ledger.duplicateDeliveries == 0)
        #expect(statistics.resentAfterConnectionLoss == 0 && statistics.requestTimeouts == 0)
        #expect(statistics.requestsWritten == count + statistics.resentUnprocessed)
        if inTwoSteps {
            // Each connection takes its 1,000 and what was open then (up to 100 more).
            #expect(statistics.connectionsReplaced >= 4 && statistics.goAways >= statistics.connectionsReplaced)
            #expect(statistics.resentUnprocessed == 0)
        } else {
            #expect(ledger.closes["goaway"] == 5)
            #expect(statistics.goAways == 5 && statistics.connectionsReplaced == 5)
            #expect(statistics.resentUnprocessed > 0)
        }
    }

    /// Polls `condition` every 20 ms; fails the test after 2 minutes (a guard against a hang, not a
    /// measure: a loaded machine has been seen to need more than 30 s).
    static func waitUntil(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while ContinuousClock.now < deadline {
            if condition() { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("condition not met within 2 minutes")
        throw CancellationError()
    }
}
