import APNSMockServer
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetObservability
import PushFleetServices
import ServiceLifecycle

/// Runs the APNs simulator until interrupted.
struct MockAPNs: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock-apns",
        abstract: "Run the APNs simulator: binary gateway, feedback service, HTTP/2 API, and a ledger on an admin port.",
        discussion: """
            The binary gateway requires a client certificate signed by --client-ca, answers the first \
            bad notification of a connection with an error response after --error-delay-ms and closes, \
            and discards whatever followed. The HTTP/2 provider API (--http2-port) validates requests \
            as APNs does; it authenticates a client certificate of --client-ca or a provider token \
            signed by a --provider-key. GET /stats on the admin port returns the ledger as JSON; \
            POST /reset clears it. --certs DIR uses server.pem, server-key.pem and ca.pem from DIR \
            (as made by scripts/make-test-certs.sh).
            """
    )

    @Option(help: "Address to listen on.")
    var host: String = "127.0.0.1"

    @Option(help: "Binary gateway port (0 picks a free one).")
    var binaryPort: Int = 2195

    @Option(help: "Feedback service port (0 picks a free one).")
    var feedbackPort: Int = 2196

    @Option(help: "Admin HTTP port for /stats and /reset (0 picks a free one).")
    var adminPort: Int = 8195

    @Option(help: "HTTP/2 provider API port (0 picks a free one).")
    var http2Port: Int = 2197

    @Option(help: ArgumentHelp("A provider-token key the HTTP/2 API accepts (repeatable).", valueName: "KID:TEAM:PUBLIC_PEM_FILE"))
    var providerKey: [String] = []

    @Option(help: "A topic the HTTP/2 API accepts (repeatable): a bundle ID allows it with every push type's suffix (.voip, …); without any, every well-formed topic.")
    var allowedTopic: [String] = []

    @Option(help: "HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS once a request authenticated (1 before).")
    var maxConcurrentStreams: Int = 1000

    @Option(help: "HTTP/2: close a connection on which no request started for this many seconds with GOAWAY (IdleTimeout).")
    var idleTimeoutS: Double?

    @Option(help: "HTTP/2: the connection window kept open for request bodies, in bytes (65535 makes clients wait for WINDOW_UPDATE often).")
    var connectionWindow: Int = 1 << 24

    @Flag(help: "HTTP/2: return credit for request bodies with a WINDOW_UPDATE per DATA frame, as common HTTP/2 servers do.")
    var windowUpdatePerRequest = false

    @Flag(help: "HTTP/2: flush every answer frame on its own (answers spread over many small TLS records).")
    var flushEachFrame = false

    @Option(help: "File of tokens registered for another topic: HTTP/2 answers them 400 DeviceTokenNotForTopic.")
    var otherTopicTokens: String?

    @Option(help: "HTTP/2: answer every Nth request stream (gateway-wide) 429 TooManyRequests.")
    var tooManyRequestsEvery: Int?

    @Option(help: "HTTP/2: answer every Nth request stream (gateway-wide) 500 InternalServerError.")
    var internalServerErrorEvery: Int?

    @Option(help: "HTTP/2: answer every Nth request stream (gateway-wide) 503 ServiceUnavailable.")
    var serviceUnavailableEvery: Int?

    @Option(name: .customLong("goaway-after"), help: "HTTP/2: send GOAWAY (Shutdown) after N streams on a connection, then close it.")
    var goAwayAfter: Int?

    @Flag(name: .customLong("goaway-in-two-steps"), help: "HTTP/2, with --goaway-after: first GOAWAY 2^31-1 and a PING (streams already open are still processed), then, once the PING is acknowledged, GOAWAY naming the last stream processed.")
    var goAwayInTwoSteps = false

    @Option(help: "HTTP/2: milliseconds every answer waits before it is written.")
    var answerDelayMs: Int?

    @Option(help: "Directory with server.pem, server-key.pem and ca.pem.")
    var certs: String?

    @Option(help: "Server certificate chain (PEM).")
    var cert: String?

    @Option(help: "Server private key (PEM).")
    var key: String?

    @Option(help: "CA (PEM) that client certificates must chain to.")
    var clientCa: String?

    @Option(help: "File of tokens that are not valid: binary answers InvalidToken (8) and closes; HTTP/2 answers 400 BadDeviceToken.")
    var invalidTokens: String?

    @Option(help: "File of tokens whose app was removed: binary accepts them and the feedback service reports them; HTTP/2 answers 410 Unregistered with a timestamp.")
    var unregisteredTokens: String?

    @Option(help: "Milliseconds before an error response is written.")
    var errorDelayMs: Int = 500

    @Option(help: "Every N accepted notifications, close that connection without a word.")
    var dropEvery: Int?

    @Option(help: "Every N accepted notifications, answer status 10 (Shutdown) and close.")
    var shutdownEvery: Int?

    @Option(help: "Accept at most N notifications per second on each connection.")
    var ratePerConnection: Int?

    @OptionGroup var metrics: MetricsOptions
    @OptionGroup var log: LogOptions

    func validate() throws {
        if self.certs == nil && (self.cert == nil || self.key == nil || self.clientCa == nil) {
            throw ValidationError("Give --certs DIR, or all of --cert, --key and --client-ca.")
        }
        guard self.errorDelayMs >= 0 else { throw ValidationError("--error-delay-ms must not be negative") }
        guard self.maxConcurrentStreams >= 1 else { throw ValidationError("--max-concurrent-streams must be at least 1") }
        if let idle = self.idleTimeoutS, !(idle > 0 && idle <= 86_400) { throw ValidationError("--idle-timeout-s is more than 0 and at most 86400") }
        guard (16_384...Int(Int32.max)).contains(self.connectionWindow) else {
            throw ValidationError("--connection-window is 16384 to 2147483647 bytes, not \(self.connectionWindow)")
        }
        for (flag, value) in [
            ("--too-many-requests-every", self.tooManyRequestsEvery), ("--internal-server-error-every", self.internalServerErrorEvery),
            ("--service-unavailable-every", self.serviceUnavailableEvery), ("--goaway-after", self.goAwayAfter),
            ("--answer-delay-ms", self.answerDelayMs),
        ] {
            if let value, value < (flag == "--answer-delay-ms" ? 0 : 1) { throw ValidationError("\(flag) must be positive") }
        }
        if self.goAwayInTwoSteps && self.goAwayAfter == nil { throw ValidationError("--goaway-in-two-steps needs --goaway-after") }
        for key in self.providerKey where key.split(separator: ":", maxSplits: 2).count != 3 {
            throw ValidationError("--provider-key \(key) is not KID:TEAM:PUBLIC_PEM_FILE")
        }
    }

    func run() async throws {
        self.log.bootstrap()
        let registry = self.metrics.bootstrap()
        let configuration = try self.makeConfiguration()
        let logger = makeLogger("pushfleet.mock-apns")
        let server = MockAPNSServer(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
        let ports = try await server.start()
        // Unbuffered: scripts read this line to learn the ports while the simulator runs.
        FileHandle.standardOutput.write(
            Data("mock-apns binary=\(ports.binary ?? 0) feedback=\(ports.feedback ?? 0) admin=\(ports.admin ?? 0) http2=\(ports.http2 ?? 0)\n".utf8)
        )
        let gauges = SimulatorMetrics()
        let ledger = server.ledger
        let metrics = try await self.metrics.service(registry, readiness: Readiness(), beforeScrape: { gauges.observe(ledger.snapshot()) }, logger: logger)
        try await Lifecycle.run([metrics, .init(service: SimulatorService(server: server))].compactMap { $0 }, grace: .seconds(10), logger: logger)
    }

    func makeConfiguration() throws -> MockAPNSConfiguration {
        let tls = MockAPNSConfiguration.TLSFiles(
            certificateChain: self.cert ?? "\(self.certs!)/server.pem",
            privateKey: self.key ?? "\(self.certs!)/server-key.pem",
            clientCA: self.clientCa ?? "\(self.certs!)/ca.pem"
        )
        return MockAPNSConfiguration(
            host: self.host,
            binaryPort: self.binaryPort,
            feedbackPort: self.feedbackPort,
            adminPort: self.adminPort,
            tls: tls,
            invalidTokens: Set(try self.invalidTokens.map { try TokenFileReader(path: $0).readAll() } ?? []),
            unregisteredTokens: Set(try self.unregisteredTokens.map { try TokenFileReader(path: $0).readAll() } ?? []),
            errorDelay: .milliseconds(Int64(self.errorDelayMs)),
            binaryFaults: .init(dropEvery: self.dropEvery, shutdownEvery: self.shutdownEvery, ratePerConnection: self.ratePerConnection),
            http2Port: self.http2Port,
            http2: .init(
                providerKeys: try self.providerKey.map { argument in
                    let parts = argument.split(separator: ":", maxSplits: 2).map(String.init)
                    return try .init(keyID: parts[0], teamID: parts[1], publicKeyPEMFile: parts[2])
                },
                allowedTopics: self.allowedTopic.isEmpty ? nil : Set(self.allowedTopic),
                otherTopicTokens: Set(try self.otherTopicTokens.map { try TokenFileReader(path: $0).readAll() } ?? []),
                maxConcurrentStreams: self.maxConcurrentStreams,
                idleTimeout: self.idleTimeoutS.map { .nanoseconds(Int64($0 * 1_000_000_000)) },
                connectionWindow: self.connectionWindow,
                windowUpdatePerRequest: self.windowUpdatePerRequest,
                flushEachFrame: self.flushEachFrame
            ),
            http2Faults: .init(
                tooManyRequestsEvery: self.tooManyRequestsEvery,
                internalServerErrorEvery: self.internalServerErrorEvery,
                serviceUnavailableEvery: self.serviceUnavailableEvery,
                goAwayAfter: self.goAwayAfter,
                goAwayInTwoSteps: self.goAwayInTwoSteps,
                answerDelay: self.answerDelayMs.map { .milliseconds(Int64($0)) }
            )
        )
    }
}

/// The simulator as a service: serving until the group shuts down.
struct SimulatorService: Service {
    let server: MockAPNSServer

    func run() async throws {
        try? await gracefulShutdown()
        try await self.server.shutdown()
    }
}
