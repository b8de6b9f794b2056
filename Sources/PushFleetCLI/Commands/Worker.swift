import APNSTransport
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
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

    @Option(help: "production or sandbox.")
    var environment: String = "production"

    @Option(help: "binary (HTTP/2 is the subject of the next release).")
    var `protocol`: String = "binary"

    @Option(help: "Gateway HOST:PORT instead of Apple's (e.g. a mock-apns).")
    var endpoint: String?

    @Option(help: "Shards worked at once, each over its own connection.")
    var connections: Int = 4

    @Option(help: "Shards of one campaign worked at once over each connection (a crash re-sends at most this many per connection).")
    var shardsPerConnection: Int = 4

    @Option(help: "Shard lease in milliseconds, renewed by every checkpoint.")
    var leaseMs: Int = 30_000

    @Option(help: "Name in leases and logs (default: host-pid-random).")
    var workerId: String?

    @OptionGroup var tls: TLSOptions
    @OptionGroup var state: StateOptions

    func validate() throws {
        guard ["production", "sandbox"].contains(self.environment) else { throw ValidationError("--environment is production or sandbox") }
        guard self.protocol == "binary" else { throw ValidationError("--protocol \(self.protocol) is not available yet; use --protocol binary") }
        guard (1...64).contains(self.connections) else { throw ValidationError("--connections is between 1 and 64") }
        guard (1...256).contains(self.shardsPerConnection) else { throw ValidationError("--shards-per-connection is between 1 and 256") }
        guard self.leaseMs >= 1_000 else { throw ValidationError("--lease-ms is at least 1000") }
        guard self.tls.hasIdentity else { throw ValidationError("the binary protocol needs a client certificate: --cert and --key, or --p12") }
    }

    func run() async throws {
        let logger = makeLogger("pushfleet.worker")
        let endpoint = try self.endpoint.map { try Endpoint(parsing: $0, option: "--endpoint") }
            ?? Endpoint(host: self.environment == "sandbox" ? "gateway.sandbox.push.apple.com" : "gateway.push.apple.com", port: 2195)
        let senderConfiguration = BinarySender.Configuration(
            host: endpoint.host, port: endpoint.port, tls: try self.tls.clientTLS().makeConfiguration(), maximumQueued: 1_000
        )
        var configuration = WorkerService.Configuration(
            topic: self.topic, environment: self.environment, connections: self.connections,
            shardsPerConnection: self.shardsPerConnection, leaseMilliseconds: self.leaseMs
        )
        if let id = self.workerId { configuration.workerID = id }
        let drain = DrainSignal()
        let signals = Task { try await Signals.waitForTermination(); drain.trigger() }
        defer { signals.cancel() }
        try await self.state.withQueue(logger: logger) { queue in
            let transport = DeliveryTransport.binary(configuration: senderConfiguration, group: MultiThreadedEventLoopGroup.singleton, logger: logger)
            let worker = WorkerService(configuration: configuration, queue: queue, transport: transport, logger: logger)
            logger.info("worker serving", metadata: ["topic": "\(self.topic)", "environment": "\(self.environment)", "endpoint": "\(endpoint)"])
            await worker.run(until: drain)
        }
    }
}
