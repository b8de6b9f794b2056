import Logging
import PushFleetObservability
import PushFleetServices
import ServiceLifecycle
import Synchronization
import UnixSignals

/// The long-running commands' services in one swift-service-lifecycle `ServiceGroup`: SIGTERM or
/// SIGINT shuts them down gracefully, last listed first (a worker drains, then its metrics endpoint
/// closes), and a service still running `grace` after the signal is cancelled.
enum Lifecycle {
    static func run(_ services: [ServiceGroupConfiguration.ServiceConfiguration], grace: Duration, logger: Logger) async throws {
        var configuration = ServiceGroupConfiguration(
            services: services, gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger
        )
        configuration.maximumGracefulShutdownDuration = grace
        configuration.maximumCancellationDuration = grace
        try await ServiceGroup(configuration: configuration).run()
    }
}

/// A service that stops taking work when the group shuts down gracefully: `body` runs until
/// its ``DrainSignal`` is triggered and it has finished what it holds. When it returns, the
/// group shuts down.
struct DrainingService: Service, CustomStringConvertible {
    let description: String
    let body: @Sendable (DrainSignal) async throws -> Void

    init(_ name: String, _ body: @escaping @Sendable (DrainSignal) async throws -> Void) {
        self.description = name
        self.body = body
    }

    func run() async throws {
        let drain = DrainSignal()
        try await withGracefulShutdownHandler {
            try await self.body(drain)
        } onGracefulShutdown: {
            drain.trigger()
        }
    }

    var configuration: ServiceGroupConfiguration.ServiceConfiguration {
        .init(service: self, successTerminationBehavior: .gracefullyShutdownGroup, failureTerminationBehavior: .gracefullyShutdownGroup)
    }
}

/// The metrics and health endpoint as a service: open until the group shuts down.
struct ObservabilityService: Service, CustomStringConvertible {
    let server: ObservabilityServer
    var description: String { "metrics on \(self.server.host):\(self.server.port)" }

    func run() async throws {
        try? await gracefulShutdown()
        await self.server.close()
    }
}

/// A value set once a service has started, read by its neighbours (readiness checks, scrapes).
final class Started<Value: Sendable>: Sendable {
    private let box = Mutex<Value?>(nil)
    func set(_ value: Value) { self.box.withLock { $0 = value } }
    var value: Value? { self.box.withLock { $0 } }
}
