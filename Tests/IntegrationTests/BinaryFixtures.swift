import APNSMockServer
import APNSTransport
import APNSWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PushFleetCore
import PushFleetTestSupport
import Testing

/// How the simulator's HTTP/2 gateway treats its clients: as kindly as it can (a 16 MiB window
/// for request bodies, refunded once half of it was read; a read burst's answers in one write), or
/// as common HTTP/2 servers do (`scripts/bench.sh --unkind-gateway`): HTTP/2's 65,535-byte window
/// refunded by a `WINDOW_UPDATE` per request, and every answer frame in a TLS record of its own.
enum GatewayManner: String, Sendable, CustomTestStringConvertible {
    case kind, unkind
    var testDescription: String { self.rawValue }
}

/// A simulator on free loopback ports (binary gateway, feedback, admin and HTTP/2) with the test
/// PKI and the test provider key, and clients that trust it.
struct BinaryFixture {
    /// The provider key the simulator knows: `TestCertificates.authKey`, under these ids.
    static let keyID = "PFTESTKEY1"
    static let teamID = "PFTESTTEAM"

    let server: MockAPNSServer
    let ports: MockAPNSServer.BoundPorts
    let certificates: TestCertificates

    var binaryPort: Int { self.ports.binary! }
    var ledger: DeliveryLedger { self.server.ledger }
    var stall: GatewayStall { self.server.stall }

    static func start(
        invalidTokens: Set<DeviceToken> = [],
        unregisteredTokens: Set<DeviceToken> = [],
        errorDelay: TimeAmount = .milliseconds(50),
        faults: MockAPNSConfiguration.BinaryFaults = .init(),
        http2Faults: MockAPNSConfiguration.HTTP2Faults = .init(),
        maxConcurrentStreams: Int = 1000,
        manner: GatewayManner = .kind
    ) async throws -> BinaryFixture {
        let certificates = try TestCertificates.shared()
        var configuration = MockAPNSConfiguration(
            binaryPort: 0,
            feedbackPort: 0,
            adminPort: 0,
            tls: .init(certificateChain: certificates.serverCertificate, privateKey: certificates.serverKey, clientCA: certificates.caCertificate),
            invalidTokens: invalidTokens,
            unregisteredTokens: unregisteredTokens,
            errorDelay: errorDelay,
            binaryFaults: faults,
            http2Port: 0,
            http2: .init(
                providerKeys: [try .init(keyID: Self.keyID, teamID: Self.teamID, publicKeyPEMFile: certificates.authKeyPublic)],
                maxConcurrentStreams: maxConcurrentStreams,
                connectionWindow: manner == .unkind ? 65_535 : 1 << 24,
                windowUpdatePerRequest: manner == .unkind,
                flushEachFrame: manner == .unkind
            ),
            http2Faults: http2Faults
        )
        // Tests check which payload each token got.
        configuration.recordPayloads = true
        let server = MockAPNSServer(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: quietLogger)
        let ports = try await server.start()
        return BinaryFixture(server: server, ports: ports, certificates: certificates)
    }

    func stop() async {
        try? await self.server.shutdown()
    }

    /// TLS for a client holding the test client certificate and trusting the test CA.
    func clientTLS() throws -> TLSConfiguration {
        try ClientTLS.certificate(
            pem: self.certificates.clientCertificate,
            key: self.certificates.clientKey,
            trusting: [self.certificates.caCertificate]
        ).makeConfiguration()
    }

    /// Sender settings for tests: a proof every `confirmEvery` frames. The simulator answers every
    /// sentinel, so the wait for that answer is long. With the 5-second default, CI (the suites in
    /// parallel on two cores) once saw a clean run write one window of 1,000 frames again with one
    /// error response fewer than the simulator sent: a sentinel answered after the sender had
    /// rightly given the connection up. Tests that want that path close the connection themselves.
    func senderConfiguration(confirmEvery: Int = 1_000) throws -> BinarySender.Configuration {
        BinarySender.Configuration(
            host: "127.0.0.1",
            port: self.binaryPort,
            tls: try self.clientTLS(),
            serverHostname: "localhost",
            confirmEvery: confirmEvery,
            confirmationTimeout: .seconds(60),
            backoff: Backoff(initial: 10_000_000, maximum: 500_000_000)
        )
    }
}

extension BinarySender {
    /// Every outcome the sender reports until its events finish (at shutdown), in order.
    func collectOutcomes() -> Task<[DeliveryOutcome], Never> {
        Task {
            var all: [DeliveryOutcome] = []
            for await outcomes in self.events { all += outcomes }
            return all
        }
    }
}

/// Tests log warnings and errors only: expected reconnects would drown the report.
let quietLogger: Logger = {
    var logger = Logger(label: "pushfleet.test")
    logger.logLevel = .warning
    return logger
}()

/// Builds raw binary-protocol bytes for the gateway tests.
struct FrameBuilder {
    var buffer = ByteBuffer()
    private let encoder = BinaryFrameEncoder()

    mutating func command2(_ identifier: UInt32, token: DeviceToken, payload: Payload, priority: UInt8 = 10) {
        self.encoder.writeCommand2(identifier: identifier, notification: BinaryNotification(token: token, payload: payload, priority: priority), into: &self.buffer)
    }

    /// A command-2 frame with arbitrary items `(id, data)`.
    mutating func command2(items: [(UInt8, [UInt8])]) {
        let length = items.reduce(0) { $0 + 3 + $1.1.count }
        self.buffer.writeMultipleIntegers(UInt8(2), UInt32(length))
        for (item, data) in items {
            self.buffer.writeMultipleIntegers(item, UInt16(data.count))
            self.buffer.writeBytes(data)
        }
    }

    mutating func command1(_ identifier: UInt32, token: DeviceToken, payload: [UInt8]) {
        self.encoder.writeCommand1(identifier: identifier, expiry: 0, token: token, payload: payload, into: &self.buffer)
    }

    mutating func command0(token: DeviceToken, payload: [UInt8]) {
        self.encoder.writeCommand0(token: token, payload: payload, into: &self.buffer)
    }
}

extension UInt32 {
    var bigEndianBytes: [UInt8] { withUnsafeBytes(of: self.bigEndian) { Array($0) } }
}
