import APNSTransport
import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetTestSupport

/// What an ``HTTP2Sender`` reported, gathered until its events finish.
struct HTTP2Outcomes {
    /// A final answer other than 200: the token's rejection, or a refusal of the provider.
    enum Answer: Equatable {
        case rejected(RejectionReason, timestamp: Int64? = nil)
        case refused(RejectionReason, status: Int)

        var reason: RejectionReason {
            switch self {
            case .rejected(let reason, _), .refused(let reason, _): return reason
            }
        }
    }

    /// The `.accepted` outcomes.
    var accepted: [DeliveryOutcome] = []
    var rejected: [(DeviceToken, Answer)] = []

    func rejection(of token: DeviceToken) -> Answer? {
        self.rejected.first { $0.0 == token }?.1
    }

    mutating func add(_ outcome: DeliveryOutcome) {
        switch outcome {
        case .accepted: self.accepted.append(outcome)
        case .rejected(_, let rejection):
            self.rejected.append((rejection.token, .rejected(rejection.reason, timestamp: rejection.timestampMilliseconds)))
        case .refused(_, let token, let refusal): self.rejected.append((token, .refused(refusal.reason, status: refusal.status)))
        }
    }
}

enum HTTP2SenderFixture {
    static let template = HTTP2NotificationTemplate(topic: "com.example.app", payload: ByteBuffer(string: #"{"aps":{"alert":"hi"}}"#))

    static func notifications(_ count: Int, seed: UInt64 = 0) -> [HTTP2Notification] {
        (0..<count).map { HTTP2Notification(token: TestTokens.token($0, seed: seed), tag: UInt64($0), template: self.template) }
    }

    /// A provider-token signer over the test key whose clock moves one second per reading.
    static func signer() throws -> ProviderTokenSigner {
        let clock = NIOLockedValueBox<Int64>(1_700_000_000)
        return try ProviderTokenSigner(
            keyPath: try TestCertificates.shared().authKey, keyID: "KEYID12345", teamID: "TEAMID1234",
            now: { clock.withLockedValue { value in
                value += 1
                return value
            } }
        )
    }

    /// Test settings against `server`: token authentication unless `certificate`, short backoffs.
    static func configuration(
        _ server: HTTP2ScriptedServer,
        signer: ProviderTokenSigner? = nil,
        certificate: Bool = false,
        maximumAttempts: Int = 5,
        maximumQueued: Int = 10_000,
        requestTimeout: TimeAmount = .seconds(10)
    ) throws -> HTTP2Sender.Configuration {
        try self.configuration(
            port: server.port, signer: signer, certificate: certificate, maximumAttempts: maximumAttempts, maximumQueued: maximumQueued,
            requestTimeout: requestTimeout
        )
    }

    /// Test settings against a server on `port` of loopback: token authentication (the test key
    /// unless `signer`) unless `certificate`, short backoffs.
    static func configuration(
        port: Int,
        signer: ProviderTokenSigner? = nil,
        certificate: Bool = false,
        connections: Int = 1,
        connectionSpacing: TimeAmount = .zero,
        idlePingInterval: TimeAmount = .seconds(60),
        maximumAttempts: Int = 5,
        maximumQueued: Int = 10_000,
        requestTimeout: TimeAmount = .seconds(10)
    ) throws -> HTTP2Sender.Configuration {
        let certificates = try TestCertificates.shared()
        let quick = Backoff(initial: 5_000_000, maximum: 20_000_000)
        return HTTP2Sender.Configuration(
            host: "127.0.0.1",
            port: port,
            tls: certificate
                ? .certificate(pem: certificates.clientCertificate, key: certificates.clientKey, trusting: [certificates.caCertificate])
                : .noClientCertificate(trusting: [certificates.caCertificate]),
            serverHostname: "localhost",
            authentication: certificate ? .certificate : .providerToken(try signer ?? self.signer()),
            connections: connections,
            connectionSpacing: connectionSpacing,
            requestTimeout: requestTimeout,
            idlePingInterval: idlePingInterval,
            maximumAttempts: maximumAttempts,
            maximumQueued: maximumQueued,
            reconnectBackoff: quick,
            retryBackoff: quick,
            tooManyRequestsBackoff: quick
        )
    }

    static func sender(_ configuration: HTTP2Sender.Configuration) throws -> (HTTP2Sender, Task<HTTP2Outcomes, Never>) {
        let sender = try HTTP2Sender(configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: quietLogger)
        let outcomes = Task {
            var outcomes = HTTP2Outcomes()
            for await batch in sender.events {
                for outcome in batch { outcomes.add(outcome) }
            }
            return outcomes
        }
        return (sender, outcomes)
    }

    /// Sends, waits for every answer, shuts down; returns the outcomes and the statistics.
    static func run(
        _ notifications: [HTTP2Notification], with configuration: HTTP2Sender.Configuration
    ) async throws -> (HTTP2Outcomes, HTTP2Sender.Statistics) {
        let (sender, outcomes) = try self.sender(configuration)
        try await sender.send(notifications)
        await sender.flush()
        let statistics = await sender.statistics()
        let unanswered = await sender.shutdown()
        precondition(unanswered.isEmpty, "flush returned with \(unanswered.count) unanswered")
        return (await outcomes.value, statistics)
    }
}

/// A count per key that a script can keep across requests.
final class ScriptCounter: Sendable {
    private let counts = NIOLockedValueBox<[String: Int]>([:])
    /// Adds one to `key` and returns the new count.
    func next(_ key: String) -> Int {
        self.counts.withLockedValue { counts in
            counts[key, default: 0] += 1
            return counts[key]!
        }
    }
}
