public import Logging
import PostgresNIO

/// PushFleet's Postgres state: the schema, the token registry, campaigns and their progress, and the
/// coordinator's leadership lock.
///
/// Lifecycle: queries go through a connection pool that works only while ``run()`` runs, so start
/// `run()` in a task of its own and cancel that task to close the store:
/// ```swift
/// let store = CampaignStore(configuration: try PostgresConfiguration(url: url), logger: logger)
/// let running = Task { await store.run() }
/// defer { running.cancel() }
/// try await store.migrate()   // fails fast, naming host:port, if Postgres is unreachable
/// ```
/// ``migrate()`` and ``withLeadership(named:_:)`` open dedicated connections and also work without
/// `run()`. A pooled query against an unreachable server waits while the pool retries (up to about a
/// minute) before it fails, so call ``migrate()`` first: it connects directly and fails at once.
///
/// Every write that must be atomic is one transaction; every batch is one statement over `unnest`
/// arrays. Errors are ``PostgresStoreError``s naming the server as `host:port`.
public final class CampaignStore: Sendable {
    public let configuration: PostgresConfiguration
    let client: PostgresClient
    let logger: Logger

    public init(configuration: PostgresConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        var client = PostgresClient.Configuration(
            host: configuration.host, port: configuration.port, username: configuration.username,
            password: configuration.password, database: configuration.database, tls: Self.clientTLS(configuration.tls)
        )
        client.options.connectTimeout = configuration.connectTimeout
        client.options.maximumConnections = max(1, configuration.maximumConnections)
        client.options.additionalStartupParameters = configuration.startupParameters
        self.client = PostgresClient(configuration: client, backgroundLogger: logger)
    }

    /// Runs the connection pool until the calling task is cancelled. Call it exactly once.
    public func run() async {
        await self.client.run()
    }

    // MARK: - Connections

    /// Runs `body` on a pooled connection; errors become ``PostgresStoreError``s about `operation`.
    /// Gives up on `body` when the connection closes under it or the calling task is cancelled (see
    /// ``abandoning(_:discard:_:)``), so `body` must only use the connection.
    func withConnection<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            return try await self.abandoning(operation) { watched in
                try await self.client.withConnection { connection in
                    watched.watch(connection)
                    return try await body(connection)
                }
            }
        } catch {
            throw self.storeError(error, operation)
        }
    }

    /// Runs `body` in one transaction on a pooled connection: committed if `body` returns, rolled back
    /// if it throws. Inside a leader's body, fenced (``LeadershipFence``).
    func withTransaction<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await self.withConnection(operation) { connection in
            try await self.transaction(on: connection, body)
        }
    }

    /// Runs a write of one statement: on a pooled connection, or, inside a leader's body, in a
    /// transaction fenced by its leadership (``LeadershipFence``).
    func withWrite<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        if LeadershipFence.current == nil {
            try await self.withConnection(operation, body)
        } else {
            try await self.withTransaction(operation, body)
        }
    }

    /// A transaction of a leader's body (``LeadershipFence``) first checks that its leadership is
    /// still the latest, and holds it so until the transaction ends.
    func transaction<T: Sendable>(on connection: PostgresConnection, _ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await connection.query("BEGIN", logger: self.logger)
        do {
            if let fence = LeadershipFence.current { try await self.check(fence, on: connection) }
            let value = try await body(connection)
            try await connection.query("COMMIT", logger: self.logger)
            return value
        } catch {
            _ = try? await connection.query("ROLLBACK", logger: self.logger)
            throw error
        }
    }

    /// Opens a connection of its own (not from the pool), runs `body`, and closes it. Like
    /// ``withConnection(_:_:)``, gives up on `body` when the connection closes under it or the
    /// calling task is cancelled.
    func withDedicatedConnection<T: Sendable>(
        _ operation: String, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            return try await self.abandoning(operation) { watched in
                try await self.withNewConnection(operation, watched) { connection in
                    let value = try await body(connection)
                    try? await connection.close()
                    return value
                }
            }
        } catch {
            throw self.storeError(error, operation)
        }
    }

    /// Opens a connection of its own, has `watched` watch it, and runs `body` on it; closes it if
    /// `body` throws, and leaves it to `body` otherwise.
    func withNewConnection<T: Sendable>(
        _ operation: String, _ watched: WatchedConnection, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        let connection = try await self.connect(operation)
        watched.watch(connection)
        do {
            return try await body(connection)
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// A new connection of its own (not from the pool); the caller closes it.
    private func connect(_ operation: String) async throws -> PostgresConnection {
        do {
            return try await PostgresConnection.connect(
                configuration: try self.connectionConfiguration(), id: Int.random(in: 1_000_000...Int.max), logger: self.logger
            )
        } catch {
            throw self.storeError(error, operation, connecting: true)
        }
    }

    private func connectionConfiguration() throws -> PostgresConnection.Configuration {
        let c = self.configuration
        let tls: PostgresConnection.Configuration.TLS
        switch c.tls.base {
        case .disable: tls = .disable
        case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
        case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(
            host: c.host, port: c.port, username: c.username, password: c.password, database: c.database, tls: tls
        )
        let timeout = c.connectTimeout.components
        configuration.options.connectTimeout = .nanoseconds(timeout.seconds * 1_000_000_000 + timeout.attoseconds / 1_000_000_000)
        configuration.options.additionalStartupParameters = c.startupParameters
        return configuration
    }

    private static func clientTLS(_ mode: PostgresConfiguration.TLSMode) -> PostgresClient.Configuration.TLS {
        switch mode.base {
        case .disable: .disable
        case .prefer: .prefer(.makeClientConfiguration())
        case .require: .require(.makeClientConfiguration())
        }
    }
}
