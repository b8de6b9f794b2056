import APNSTransport
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetObservability
import PushFleetRedis
import PushFleetServices

/// Serves campaigns of one topic and environment until SIGTERM/SIGINT, then drains.
struct Worker: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deliver campaigns of a topic and environment until SIGTERM, then drain.",
        discussion: """
            On SIGTERM or SIGINT the worker stops claiming shards, waits for the outcomes of what it \
            already sent, checkpoints, and releases the unsent tail to other workers.
            """
    )

    @Option(help: "The app's bundle ID (the APNs topic).")
    var topic: String

    @Option(help: "production or sandbox. (default: production)", transform: APNsEnvironment.option("--environment"))
    var environment: APNsEnvironment = .production

    @Option(help: "http2 (the provider API APNs speaks today) or binary (the legacy protocol). (default: http2)", transform: DeliveryProtocol.option("--protocol"))
    var `protocol`: DeliveryProtocol = .http2

    @Option(help: "Gateway HOST:PORT instead of Apple's (e.g. a mock-apns).")
    var endpoint: String?

    @Option(help: "APNs connections. HTTP/2: one pool of this many, shared by up to connections × shards-per-connection shards at once; binary: one connection per slot, each working its own shards.")
    var connections: Int = 4

    @Option(help: "Seconds between opening two HTTP/2 connections of the pool.")
    var connectionSpacingS: Double = 2

    @Option(help: "Shards of one campaign worked at once per connection (a crash re-sends at most the unanswered part of this many per connection). Binary: more while the proof rounds need more frames, see --confirm-every.")
    var shardsPerConnection: Int = 4

    @Option(help: "Binary: frames between two proofs, and the most a connection holds unconfirmed. A connection works more than --shards-per-connection shards while its proof rounds need more frames to outlast the gateway's error delay, up to about this many tokens (plus one shard): a crash re-sends at most that many per connection.")
    var confirmEvery: Int = 20_000

    @Option(help: "Shard lease in milliseconds, renewed by every checkpoint.")
    var leaseMs: Int = 30_000

    @Option(help: "Name in leases and logs (default: host-pid-random).")
    var workerId: String?

    @OptionGroup var providerToken: ProviderTokenOptions
    @OptionGroup var tls: TLSOptions
    @OptionGroup var state: StateOptions
    @OptionGroup var metrics: MetricsOptions
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard (1...64).contains(self.connections) else { throw ValidationError("--connections is between 1 and 64") }
        guard (1...256).contains(self.shardsPerConnection) else { throw ValidationError("--shards-per-connection is between 1 and 256") }
        guard (1...1_000_000).contains(self.confirmEvery) else { throw ValidationError("--confirm-every is between 1 and 1000000") }
        guard self.leaseMs >= 1_000 else { throw ValidationError("--lease-ms is at least 1000") }
        try self.providerToken.validate(protocol: self.protocol, tls: self.tls)
        guard self.connectionSpacingS >= 0 else { throw ValidationError("--connection-spacing-s must not be negative") }
    }

    func run() async throws {
        self.log.bootstrap()
        let registry = self.metrics.bootstrap()
        let logger = makeLogger("pushfleet.worker")
        let transport = try self.makeTransport(logger: logger)
        var configuration = WorkerService.Configuration(
            topic: self.topic, environment: self.environment, connections: self.connections,
            shardsPerConnection: self.shardsPerConnection, leaseMilliseconds: self.leaseMs
        )
        if let id = self.workerId { configuration.workerID = id }
        if self.protocol == .http2, let team = self.providerToken.teamId, let key = self.providerToken.keyId {
            configuration.credentials = "team \(team), key \(key)"
        } else if self.tls.hasIdentity {
            configuration.credentials = "the client certificate"
        }
        let serviceConfiguration = configuration
        let worker = Started<WorkerService>()
        let totals = Started<SenderTotals>()
        let readiness = Readiness([
            try Readiness.Check.redis(self.state.redis),
            Readiness.Check("credentials") { worker.value.map { $0.senderProblem } ?? "starting" },
        ])
        let state = self.state
        let described = ["topic": "\(self.topic)", "environment": "\(self.environment)", "protocol": "\(self.protocol)"] as Logger.Metadata
        let serving = DrainingService("worker") { drain in
            try await state.withQueue(logger: logger) { queue in
                let service = WorkerService(configuration: serviceConfiguration, queue: queue, transport: transport, logger: logger)
                worker.set(service)
                logger.info("worker serving", metadata: described)
                if let caveat = SenderLoops.priorityCaveat() { logger.notice("\(caveat)") }
                totals.set(await service.run(until: drain))
            }
        }
        let metrics = try await self.metrics.service(registry, readiness: readiness, logger: logger)
        // A drain ends within its 20 s timeout and a checkpoint; past 50 s it is cancelled.
        try await Lifecycle.run([metrics, serving.configuration].compactMap { $0 }, grace: .seconds(50), logger: logger)
        if let totals = totals.value {
            // One line for scripts and tests: what the senders counted over the worker's life.
            print("sender \(PushFleetJSON.encode(totals))")
        }
    }

    private func makeTransport(logger: Logger) throws -> DeliveryTransport {
        if self.protocol == .binary {
            let endpoint = try self.endpoint.map { try Endpoint(parsing: $0, option: "--endpoint") }
                ?? Endpoint(host: self.environment.binaryHost, port: 2195)
            let configuration = BinarySender.Configuration(
                host: endpoint.host, port: endpoint.port, tls: try self.tls.clientTLS().makeConfiguration(), confirmEvery: self.confirmEvery,
                maximumQueued: 1_000
            )
            return .binary(configuration: configuration, loops: .campaign, logger: logger)
        }
        let endpoint = try self.endpoint.map { try Endpoint(parsing: $0, option: "--endpoint") }
            ?? Endpoint(host: self.environment.http2Host, port: 443)
        let (tls, authentication) = try self.providerToken.http2Credentials(tls: self.tls)
        let configuration = HTTP2Sender.Configuration(
            host: endpoint.host, port: endpoint.port, tls: tls, authentication: authentication, connections: self.connections,
            connectionSpacing: .nanoseconds(Int64(self.connectionSpacingS * 1_000_000_000))
        )
        return .http2(configuration: configuration, loops: .campaign, logger: logger)
    }
}
