import ArgumentParser
import Logging
import Prometheus
import PushFleetObservability
import PushFleetRedis
import ServiceLifecycle

/// `--metrics-port` and `--metrics-host`: Prometheus text at `/metrics`, `/healthz` and `/readyz`
/// for the long-running commands. Off unless a port is given.
struct MetricsOptions: ParsableArguments {
    @Option(help: "Serve /metrics (Prometheus), /healthz and /readyz over HTTP on this port; 0 picks a free one and logs it. Off by default.")
    var metricsPort: Int?

    @Option(help: "Address the metrics port listens on.")
    var metricsHost: String = "0.0.0.0"

    func validate() throws {
        if let port = self.metricsPort, !(0...65_535).contains(port) {
            throw ValidationError("--metrics-port is 0 to 65535, not \(port)")
        }
    }

    /// Routes the process's metrics to a Prometheus registry, when a port is given. Call it first
    /// in `run()`: a metric made before it counts nowhere.
    func bootstrap() -> PrometheusCollectorRegistry? {
        self.metricsPort == nil ? nil : MetricsBootstrap.prometheus()
    }

    /// The metrics and health service for `registry` (from ``bootstrap()``), listening already;
    /// `nil` without a registry.
    func service(
        _ registry: PrometheusCollectorRegistry?, readiness: Readiness, beforeScrape: (@Sendable () async -> Void)? = nil, logger: Logger
    ) async throws -> ServiceGroupConfiguration.ServiceConfiguration? {
        guard let registry, let port = self.metricsPort else { return nil }
        let server = try await ObservabilityServer.start(
            host: self.metricsHost, port: port, registry: registry, readiness: readiness, beforeScrape: beforeScrape, logger: logger
        )
        return .init(service: ObservabilityService(server: server))
    }
}

extension Readiness.Check {
    /// Redis answers `PING`, on a connection of the check's own (a busy or stuck worker
    /// connection does not make Redis look down, nor the other way round).
    static func redis(_ url: String) throws -> Readiness.Check {
        let client = RedisClient(configuration: try RedisConfiguration(url: url))
        return Readiness.Check("redis") {
            do {
                let reply = try await client.withConnection { try $0.command("PING") }
                if case .error(let message) = reply { return message }
                return nil
            } catch {
                return "\(error)"
            }
        }
    }
}
