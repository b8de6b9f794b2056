import APNSMockServer
import APNSTransport
import APNSWire
import NIOCore
import PushFleetCore
import PushFleetTestSupport
import Testing

/// Flow control on one connection: every rejection carries a JSON body, and the bodies of a stale
/// audience add up to far more than any window. The connection must carry them all without waiting
/// for a request timeout, whether the gateway keeps a generous window for request bodies or grants
/// credit 65,535 bytes at a time. The client keeps HTTP/2's 65,535-byte window here, so credit goes
/// back some ten times per run; its default (1 MiB) takes the same path, less often.
/// Serialized: each case keeps the shared event loops busy, and other suites' exchanges run on them too.
@Suite(.serialized) struct HTTP2SenderFlowControlTests {
    @Test(arguments: [(65_535, 1 << 24), (65_535, 65_535), (1 << 20, 65_535)])
    func oneConnectionCarriesAnyNumberOfRejections(clientWindow: Int, gatewayWindow: Int) async throws {
        let count = 12_000
        let notifications = HTTP2SenderFixture.notifications(count)
        // Half of them answered 400 BadDeviceToken, a quarter 410 Unregistered: about 300 KB of
        // answer bodies, between four and five of HTTP/2's default windows.
        let invalid = Set(notifications.indices.filter { $0 % 2 == 0 }.map { notifications[$0].token })
        let unregistered = Set(notifications.indices.filter { $0 % 4 == 1 }.map { notifications[$0].token })
        let gateway = try await HTTP2GatewayFixture.start(
            invalidTokens: invalid, unregisteredTokens: unregistered, connectionWindow: gatewayWindow
        )
        defer { Task { await gateway.stop() } }
        // A flow-control stall lasts until the request timeout, however long it is; 60 s rather than
        // the default 10 keeps a loaded debug run (other suites beside it, as in CI) from taking
        // slow answers for a stall, as one full local run did.
        var configuration = try HTTP2SenderFixture.configuration(
            port: gateway.port, certificate: true, maximumQueued: count, requestTimeout: .seconds(60)
        )
        configuration.connectionWindow = clientWindow
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(notifications, with: configuration)
        Self.expectEachAnsweredOnce(outcomes, statistics, gateway, count: count, invalid: invalid, unregistered: unregistered, connections: 1)
    }

    /// Every notification answered once, as the gateway decided, without a stall or a re-send.
    private static func expectEachAnsweredOnce(
        _ outcomes: HTTP2Outcomes, _ statistics: HTTP2Sender.Statistics, _ gateway: HTTP2GatewayFixture,
        count: Int, invalid: Set<DeviceToken>, unregistered: Set<DeviceToken>, connections: Int
    ) {
        #expect(outcomes.accepted.count == count - invalid.count - unregistered.count)
        #expect(outcomes.rejected.count { $0.1.reason == .badDeviceToken } == invalid.count)
        #expect(outcomes.rejected.count { $0.1.reason == .unregistered } == unregistered.count)
        #expect(statistics.requestTimeouts == 0, "a stalled connection waited for its request timeout")
        #expect(statistics.resentAfterConnectionLoss == 0)
        #expect(statistics.connectionsOpened == connections)
        let ledger = gateway.ledger.snapshot()
        #expect(ledger.accepted == count - invalid.count - unregistered.count)
        #expect(ledger.duplicateDeliveries == 0)
    }

    /// The same campaign against a gateway as unkind as common HTTP/2 servers are: 250 streams,
    /// HTTP/2's 65,535-byte window for request bodies refunded by a WINDOW_UPDATE per request,
    /// every answer frame in a TLS record of its own, one answer in five a rejection with a body.
    /// Every notification is answered once, on the connections opened, without a stall.
    @Test(arguments: [(true, true), (true, false), (false, true)])
    func aLessKindGatewayGetsEveryRequestOnceWithoutAStall(windowUpdatePerRequest: Bool, flushEachFrame: Bool) async throws {
        let count = 6_000
        let notifications = HTTP2SenderFixture.notifications(count)
        let invalid = Set(notifications.indices.filter { $0 % 10 == 3 }.map { notifications[$0].token })
        let unregistered = Set(notifications.indices.filter { $0 % 10 == 7 }.map { notifications[$0].token })
        let gateway = try await HTTP2GatewayFixture.start(
            invalidTokens: invalid, unregisteredTokens: unregistered, maxConcurrentStreams: 250, connectionWindow: 65_535,
            windowUpdatePerRequest: windowUpdatePerRequest, flushEachFrame: flushEachFrame
        )
        defer { Task { await gateway.stop() } }
        let configuration = try HTTP2SenderFixture.configuration(
            port: gateway.port, certificate: true, connections: 2, maximumQueued: count, requestTimeout: .seconds(60)
        )
        let (outcomes, statistics) = try await HTTP2SenderFixture.run(notifications, with: configuration)
        Self.expectEachAnsweredOnce(outcomes, statistics, gateway, count: count, invalid: invalid, unregistered: unregistered, connections: 2)
    }
}
