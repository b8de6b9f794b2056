import APNSMockServer
import APNSTransport
import APNSWire
import Crypto
import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import PushFleetCore
import PushFleetTestSupport
import Synchronization

/// A wall clock the tests move by hand, in milliseconds since 1970.
final class TestWallClock: Sendable {
    private let value: Atomic<Int64>

    init(_ milliseconds: Int64 = 1_750_000_000_000) { self.value = Atomic(milliseconds) }

    var now: Int64 { self.value.load(ordering: .relaxed) }

    func advance(minutes: Int64) { self.value.add(minutes * 60_000, ordering: .relaxed) }
}

/// A simulator serving the HTTP/2 provider API on a free loopback port, with two provider keys of
/// two teams, a hand-moved clock, and clients with or without a client certificate.
struct HTTP2GatewayFixture {
    static let keyID = "KEYID00001"
    static let teamID = "TEAM000001"
    static let otherKeyID = "KEYID00002"
    static let otherTeamID = "TEAM000002"
    /// A second key of the first team (its private half is `otherKey`).
    static let secondKeyID = "KEYID00003"
    static let topic = "com.example.app"

    let server: MockAPNSServer
    let port: Int
    let certificates: TestCertificates
    let clock: TestWallClock
    let key: P256.Signing.PrivateKey
    let otherKey: P256.Signing.PrivateKey

    var ledger: DeliveryLedger { self.server.ledger }

    static func start(
        invalidTokens: Set<DeviceToken> = [],
        unregisteredTokens: Set<DeviceToken> = [],
        otherTopicTokens: Set<DeviceToken> = [],
        allowedTopics: Set<String>? = nil,
        maxConcurrentStreams: Int = 1000,
        idleTimeout: TimeAmount? = nil,
        connectionWindow: Int = 1 << 24,
        windowUpdatePerRequest: Bool = false,
        flushEachFrame: Bool = false,
        faults: MockAPNSConfiguration.HTTP2Faults = .init()
    ) async throws -> HTTP2GatewayFixture {
        let certificates = try TestCertificates.shared()
        let clock = TestWallClock()
        let configuration = MockAPNSConfiguration(
            binaryPort: nil,
            feedbackPort: nil,
            adminPort: nil,
            tls: .init(certificateChain: certificates.serverCertificate, privateKey: certificates.serverKey, clientCA: certificates.caCertificate),
            invalidTokens: invalidTokens,
            unregisteredTokens: unregisteredTokens,
            http2Port: 0,
            http2: .init(
                providerKeys: [
                    try .init(keyID: Self.keyID, teamID: Self.teamID, publicKeyPEMFile: certificates.authKeyPublic),
                    try .init(keyID: Self.otherKeyID, teamID: Self.otherTeamID, publicKeyPEMFile: certificates.otherAuthKeyPublic),
                    try .init(keyID: Self.secondKeyID, teamID: Self.teamID, publicKeyPEMFile: certificates.otherAuthKeyPublic),
                ],
                allowedTopics: allowedTopics,
                otherTopicTokens: otherTopicTokens,
                maxConcurrentStreams: maxConcurrentStreams,
                idleTimeout: idleTimeout,
                connectionWindow: connectionWindow,
                windowUpdatePerRequest: windowUpdatePerRequest,
                flushEachFrame: flushEachFrame,
                now: { clock.now }
            ),
            http2Faults: faults
        )
        let server = MockAPNSServer(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: quietLogger)
        let ports = try await server.start()
        return HTTP2GatewayFixture(
            server: server,
            port: ports.http2!,
            certificates: certificates,
            clock: clock,
            key: try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: certificates.authKey, encoding: .utf8)),
            otherKey: try P256.Signing.PrivateKey(pemRepresentation: String(contentsOfFile: certificates.otherAuthKey, encoding: .utf8))
        )
    }

    func stop() async {
        try? await self.server.shutdown()
    }

    /// A client without a client certificate (provider-token authentication).
    func tokenClient(ignoreStreamLimit: Bool = false) async throws -> RawHTTP2Client {
        let tls = try ClientTLS.noClientCertificate(trusting: [self.certificates.caCertificate]).makeConfiguration()
        return try await RawHTTP2Client.connect(port: self.port, tls: tls, ignoreStreamLimit: ignoreStreamLimit)
    }

    /// A client presenting the test client certificate (signed by the configured CA).
    func certificateClient(rogue: Bool = false) async throws -> RawHTTP2Client {
        let tls = try ClientTLS.certificate(
            pem: rogue ? self.certificates.rogueClientCertificate : self.certificates.clientCertificate,
            key: rogue ? self.certificates.rogueClientKey : self.certificates.clientKey,
            trusting: [self.certificates.caCertificate]
        ).makeConfiguration()
        return try await RawHTTP2Client.connect(port: self.port, tls: tls)
    }

    /// `bearer <JWT>` for `keyID`, signed by `key` (the first test key unless given), issued at the
    /// fixture clock's time unless `issuedAt` (seconds) is given.
    func authorization(keyID: String = keyID, teamID: String = teamID, key: P256.Signing.PrivateKey? = nil, issuedAt: Int64? = nil) throws -> String {
        let token = try ProviderToken.sign(keyID: keyID, teamID: teamID, issuedAt: issuedAt ?? self.clock.now / 1000, key: key ?? self.key)
        return "bearer " + token.compact
    }

    /// A valid request's header block for `token`, with `authorization` if given.
    static func headers(token: DeviceToken = TestTokens.token(1), authorization: String?, apnsID: String? = nil) -> [(String, String)] {
        var headers = [
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(token.hexString)"), (":authority", "127.0.0.1"),
            ("apns-topic", Self.topic), ("apns-push-type", "alert"), ("apns-priority", "10"),
        ]
        if let authorization { headers.append(("authorization", authorization)) }
        if let apnsID { headers.append(("apns-id", apnsID)) }
        return headers
    }

    static let body = "{\"aps\":{\"alert\":\"Ding dong\"}}"
}

extension [(String, String)] {
    /// These headers with `name` set to `value` (removed if `nil`), in place of its first occurrence.
    func setting(_ name: String, to value: String?) -> Self {
        guard let index = self.firstIndex(where: { $0.0 == name }) else { return value.map { self + [(name, $0)] } ?? self }
        var copy = self
        if let value { copy[index].1 = value } else { copy.remove(at: index) }
        return copy
    }
}

extension RawHTTP2Client.Response {
    /// The `reason` of an error body, if any.
    var reason: String? {
        guard case .string(let reason)? = (try? JSONParser.parse(Array(self.body.utf8)))?["reason"] else { return nil }
        return reason
    }

    /// The `timestamp` of an error body, if any.
    var timestamp: Int64? {
        guard case .number(let text)? = (try? JSONParser.parse(Array(self.body.utf8)))?["timestamp"] else { return nil }
        return Int64(text)
    }
}
