import Foundation
import Logging
import PushFleetCore
import PushFleetPostgres
import PushFleetTestSupport

/// Helpers for the Postgres store tests. Every test uses its own topics and campaign ids, so the tests
/// run in parallel against one database.
enum PostgresFixture {
    /// Warnings and errors only.
    static let logger: Logger = {
        var logger = Logger(label: "pushfleet.test.postgres")
        logger.logLevel = .warning
        return logger
    }()

    static func configuration() throws -> PostgresConfiguration {
        try PostgresConfiguration(url: try IntegrationEnvironment.postgresURL())
    }

    /// A migrated store on the test database, its pool running for the duration of `body`.
    @discardableResult
    static func withStore<T: Sendable>(_ body: (CampaignStore) async throws -> T) async throws -> T {
        let store = CampaignStore(configuration: try self.configuration(), logger: self.logger)
        let running = Task { await store.run() }
        defer { running.cancel() }
        try await store.migrate()
        return try await body(store)
    }

    /// A topic no other test uses.
    static func topic(_ label: String) -> String {
        "com.example.\(label).\(String(UInt64.random(in: 0...UInt64.max), radix: 36))"
    }

    /// `count` distinct 32-byte tokens no other test uses.
    static func tokens(_ count: Int) -> [DeviceToken] {
        TestTokens.tokens(count, seed: UInt64.random(in: 1...UInt64.max))
    }

    /// Tokens in the registry's order: ascending bytes.
    static func sorted(_ tokens: [DeviceToken]) -> [DeviceToken] {
        tokens.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    /// A campaign of `shards` shards of `perShard` tokens.
    static func campaign(topic: String, shards: Int = 3, perShard: Int = 10, id: UUID = UUID()) -> NewCampaign {
        NewCampaign(
            id: id,
            definition: CampaignDefinition(
                topic: topic, environment: .production, payload: Array(#"{"aps":{"alert":"hi"}}"#.utf8), pushType: "alert", priority: 10,
                expiration: 0, collapseID: "c1"
            ),
            shardSize: perShard, shardTokenCounts: Array(repeating: perShard, count: shards), totalTokens: shards * perShard, duplicatesDropped: 2
        )
    }
}
