import ArgumentParser
import Foundation
import Logging
import PushFleetPostgres
import PushFleetRedis

/// Where the state lives: `--redis` and `--postgres`, with their environment variables.
struct StateOptions: ParsableArguments {
    @Option(help: "Redis URL: a standalone Redis, or any node of a Redis Cluster (env PUSHFLEET_REDIS_URL).")
    var redis: String = ProcessInfo.processInfo.environment["PUSHFLEET_REDIS_URL"] ?? "redis://127.0.0.1:6379"

    @Option(help: "Postgres URL (env PUSHFLEET_POSTGRES_URL).")
    var postgres: String = ProcessInfo.processInfo.environment["PUSHFLEET_POSTGRES_URL"] ?? "postgres://postgres@127.0.0.1:5432/pushfleet"

    /// Opens Redis, runs `body`, closes.
    func withQueue<T: Sendable>(logger: Logger, _ body: (CampaignQueue) async throws -> T) async throws -> T {
        let client = RedisClient(configuration: try RedisConfiguration(url: self.redis))
        do {
            let result = try await body(CampaignQueue(client: client))
            try? await client.shutdown()
            return result
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// Opens Postgres (creating or migrating the schema on first use), runs `body`, closes.
    func withStore<T: Sendable>(logger: Logger, _ body: (CampaignStore) async throws -> T) async throws -> T {
        let store = CampaignStore(configuration: try PostgresConfiguration(url: self.postgres), logger: logger)
        let running = Task { await store.run() }
        defer { running.cancel() }
        try await store.migrate()
        return try await body(store)
    }

    /// Both.
    func withState<T: Sendable>(logger: Logger, _ body: (CampaignQueue, CampaignStore) async throws -> T) async throws -> T {
        try await self.withStore(logger: logger) { store in
            try await self.withQueue(logger: logger) { queue in try await body(queue, store) }
        }
    }
}

/// The CLI's logger, to standard error: `--log-level` (or `PUSHFLEET_LOG_LEVEL`: trace, debug,
/// info, notice, warning, error, critical) overrides `level`.
func makeLogger(_ label: String, level: Logger.Level = .info) -> Logger {
    var logger = Logger(label: label)
    logger.logLevel = LogOptions.chosenLevel ?? ProcessInfo.processInfo.environment["PUSHFLEET_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? level
    return logger
}
