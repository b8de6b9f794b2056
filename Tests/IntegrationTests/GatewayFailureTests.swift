import APNSMockServer
import APNSTransport
import APNSWire
import NIOCore
import NIOPosix
import PushFleetAPI
import PushFleetCore
import PushFleetTestSupport
import Testing

/// Gateways a sender cannot use at all: TLS refused by either side, nothing listening, every
/// connection closed during its handshake. What waits for them must not wait for ever: after
/// `maximumAttempts` failed connections in a row, with none working, every notification is refused
/// with why, over both protocols, so that a campaign pauses with the reason
/// (``PipelineTests/aGatewayThatRefusesTheCertificatePausesTheCampaign(_:)``) instead of staying
/// `running` with nothing sent. Before, both senders reconnected for ever, and over TLS 1.3 a
/// refused certificate looked like an outage, `ConnectionLost`. Against the simulator over real
/// TLS: it refuses certificates as APNs would. The time limit makes a sender that waits for ever a
/// failure rather than a hang (the suite takes a second).
@Suite(.timeLimit(.minutes(2))) struct GatewayFailureTests {
    enum Fault: String, CaseIterable, CustomTestStringConvertible {
        /// A client certificate from a CA the gateway does not trust: it ends the handshake with an alert.
        case rogueClientCertificate
        /// A server certificate the client's trust roots do not cover.
        case untrustedServer
        /// Nothing listens on the port.
        case nothingListening
        /// TCP connects, and the connection is closed before TLS says a word.
        case closedDuringHandshake
        /// TCP connects, and nothing answers the TLS handshake (before, the connection waited for ever).
        case silentDuringHandshake

        var testDescription: String { self.rawValue }

        /// The refusal expected: its reason, whether it is an outage, and words of its detail.
        var expected: (reason: RejectionReason, isOutage: Bool, detail: String) {
            switch self {
            case .rogueClientCertificate: (.tlsFailure, false, "sent TLS alert")
            case .untrustedServer: (.tlsFailure, false, "CERTIFICATE_VERIFY_FAILED")
            case .nothingListening, .closedDuringHandshake, .silentDuringHandshake: (.cannotConnect, true, "cannot connect to 127.0.0.1:")
            }
        }
    }

    enum WireProtocol: String, CaseIterable, CustomTestStringConvertible {
        case binary, http2
        var testDescription: String { self.rawValue }
    }

    /// What a run reported, by tag.
    struct Outcome {
        var accepted = 0
        var refused: [UInt64: ProviderRefusal] = [:]
        var rejected = 0
    }

    @Test(arguments: WireProtocol.allCases, Fault.allCases)
    func everyNotificationIsRefusedWithWhy(_ wire: WireProtocol, _ fault: Fault) async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let proxy = try await OutageProxy.start(port: wire == .http2 ? fixture.ports.http2! : fixture.binaryPort)
        defer { Task { await proxy.stop() } }
        proxy.cut()
        // Takes connections and reads what comes, saying nothing.
        let silent = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        defer { silent.close(promise: nil) }
        let port: Int
        switch fault {
        case .nothingListening: port = try FreePort.take()
        case .closedDuringHandshake: port = proxy.port
        case .silentDuringHandshake: port = try #require(silent.localAddress?.port)
        case .rogueClientCertificate, .untrustedServer: port = wire == .http2 ? fixture.ports.http2! : fixture.binaryPort
        }

        let run = try Self.sender(wire, port: port, fault: fault, certificates: fixture.certificates)
        let outcome = try await run.send(Self.tokens(40))

        #expect(outcome.accepted == 0)
        #expect(outcome.rejected == 0, "no token's outcome: the refusals are about the gateway")
        #expect(outcome.refused.count == 40, "every notification is refused, none left waiting")
        let expected = fault.expected
        for refusal in Set(outcome.refused.values) {
            #expect(refusal.reason == expected.reason, "\(refusal)")
            #expect(refusal.isOutage == expected.isOutage, "\(refusal)")
            #expect(refusal.detail?.contains(expected.detail) == true, "\(refusal)")
            #expect(refusal.detail?.contains("\(port)") == true, "the detail names the gateway: \(refusal)")
        }
        #expect(fixture.ledger.snapshot().accepted == 0)
    }

    /// Once the gateway answers again the same sender delivers: the refusals last only while every
    /// connection fails.
    @Test(arguments: WireProtocol.allCases)
    func aGatewayReachableAgainIsUsedAgain(_ wire: WireProtocol) async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let proxy = try await OutageProxy.start(port: wire == .http2 ? fixture.ports.http2! : fixture.binaryPort)
        defer { Task { await proxy.stop() } }
        proxy.cut()
        let run = try Self.sender(wire, port: proxy.port, fault: nil, certificates: fixture.certificates)

        let refused = try await run.send(Self.tokens(20, seed: 1), shutdown: false)
        #expect(refused.refused.count == 20)
        proxy.restore()
        let delivered = try await run.send(Self.tokens(20, seed: 2))
        #expect(delivered.accepted == 20)
        #expect(delivered.refused.isEmpty)
        #expect(fixture.ledger.snapshot().distinctTokens == 20)
    }

    // MARK: - Helpers

    static func tokens(_ count: Int, seed: UInt64 = 0) -> [DeviceToken] { TestTokens.tokens(count, seed: seed) }

    /// A sender of `wire` to 127.0.0.1:`port`, with the test PKI as `fault` bends it, quick backoffs
    /// and five attempts.
    static func sender(_ wire: WireProtocol, port: Int, fault: Fault?, certificates: TestCertificates) throws -> Run {
        let certificate = fault == .rogueClientCertificate ? certificates.rogueClientCertificate : certificates.clientCertificate
        let key = fault == .rogueClientCertificate ? certificates.rogueClientKey : certificates.clientKey
        let roots = [fault == .untrustedServer ? certificates.directory + "/rogue-ca.pem" : certificates.caCertificate]
        let backoff = Backoff(initial: 5_000_000, maximum: 20_000_000)
        // Short only where the handshake is meant to time out: a loaded machine may take long over one.
        let connectTimeout: TimeAmount = fault == .silentDuringHandshake ? .milliseconds(300) : .seconds(10)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        switch wire {
        case .binary:
            let configuration = BinarySender.Configuration(
                host: "127.0.0.1", port: port, tls: try ClientTLS.certificate(pem: certificate, key: key, trusting: roots).makeConfiguration(),
                serverHostname: "localhost", confirmationTimeout: .seconds(60), connectTimeout: connectTimeout, backoff: backoff
            )
            return Run(BinarySender(configuration: configuration, eventLoop: loop, logger: quietLogger))
        case .http2:
            var configuration = try HTTP2SenderFixture.configuration(port: port, certificate: true)
            configuration.tls = .certificate(pem: certificate, key: key, trusting: roots)
            configuration.reconnectBackoff = backoff
            configuration.connectTimeout = connectTimeout
            return Run(try HTTP2Sender(configuration: configuration, eventLoop: loop, logger: quietLogger))
        }
    }

    /// One sender of either protocol, and what it reports.
    final class Run: Sendable {
        private let send: @Sendable ([DeviceToken], UInt64) async throws -> Void
        private let outcomes: AsyncStream<[DeliveryOutcome]>
        private let shutdown: @Sendable () async -> Int

        init(_ sender: BinarySender) {
            let payload = try! APSPayload(alert: .text("ding dong"), sound: "default").payload(for: .binaryFrame)
            self.outcomes = sender.events
            self.send = { tokens, base in
                try await sender.send(tokens.enumerated().map { BinaryNotification(token: $1, payload: payload, tag: base + UInt64($0)) })
            }
            self.shutdown = { await sender.shutdown().count }
        }

        init(_ sender: HTTP2Sender) {
            self.outcomes = sender.events
            self.send = { tokens, base in
                try await sender.send(
                    tokens.enumerated().map { HTTP2Notification(token: $1, tag: base + UInt64($0), template: HTTP2SenderFixture.template) }
                )
            }
            self.shutdown = { await sender.shutdown().count }
        }

        /// Sends `tokens`, waits until each has its outcome, and shuts the sender down unless told not to.
        func send(_ tokens: [DeviceToken], shutdown: Bool = true) async throws -> Outcome {
            var outcome = Outcome()
            var events = self.outcomes.makeAsyncIterator()
            try await self.send(tokens, 0)
            while outcome.accepted + outcome.rejected + outcome.refused.count < tokens.count, let batch = await events.next() {
                for event in batch {
                    switch event {
                    case .accepted: outcome.accepted += 1
                    case .rejected: outcome.rejected += 1
                    case .refused(let tag, _, let refusal): outcome.refused[tag] = refusal
                    }
                }
            }
            if shutdown { #expect(await self.shutdown() == 0) }
            return outcome
        }
    }
}
