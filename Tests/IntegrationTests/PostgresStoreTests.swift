import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetTestSupport
import Testing

/// `CampaignStore` against a real Postgres: schema, connection errors, token registry.
@Suite struct PostgresStoreTests {
    @Test func migrateIsIdempotentAndSafeWhenConcurrent() async throws {
        let configuration = try PostgresFixture.configuration()
        let first = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        let second = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        async let a: Void = first.migrate()
        async let b: Void = second.migrate()
        _ = try await (a, b)
        try await first.migrate()
        try await second.migrate()
        try await PostgresFixture.withStore { store async throws in
            #expect(try await store.schemaVersions() == Array(1...18))
        }
    }

    @Test func unreachableServerErrorNamesHostAndPort() async throws {
        // Port 1 on loopback: nothing listens there, so the connection is refused at once.
        let configuration = try PostgresConfiguration(url: "postgres://pf:hunter2@127.0.0.1:1/pushfleet")
        let store = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        for operation in ["migrate", "lead"] {
            let error = await #expect(throws: PostgresStoreError.self) {
                if operation == "migrate" { try await store.migrate() } else { _ = try await store.withLeadership { 1 } }
            }
            #expect(error?.code == .connectionFailed)
            #expect(error?.message.contains("127.0.0.1:1") == true, "\(error.map { "\($0)" } ?? "")")
            #expect(error?.message.contains("hunter2") == false)
        }
    }

    @Test func importsTenThousandTokensAndPagesThroughThem() async throws {
        let topic = PostgresFixture.topic("import")
        let tokens = PostgresFixture.tokens(10_000)
        try await PostgresFixture.withStore { store async throws in
            let written = try await store.importTokens(tokens + Array(tokens.prefix(100)), topic: topic, environment: .production, registeredAt: Date())
            #expect(written == 10_000)
            #expect(try await store.countTokens(topic: topic, environment: .production, status: .active) == 10_000)
            #expect(try await store.importTokens(Array(tokens.prefix(10)), topic: topic, environment: .production, registeredAt: Date()) == 10)

            var paged: [DeviceToken] = []
            var after: DeviceToken? = nil
            var pages = 0
            while true {
                let page = try await store.activeTokens(topic: topic, environment: .production, after: after, limit: 1_500)
                if page.isEmpty { break }
                paged += page
                after = page.last
                pages += 1
            }
            #expect(pages == 7)
            #expect(paged == PostgresFixture.sorted(tokens))
            #expect(try await store.activeTokens(topic: topic, environment: .sandbox, after: nil, limit: 10).isEmpty)
            #expect(try await store.activeTokens(topic: topic + ".other", environment: .production, after: nil, limit: 10).isEmpty)
        }
    }

    @Test func reRegistrationAfterInvalidSinceReactivates() async throws {
        let topic = PostgresFixture.topic("reregister")
        let tokens = PostgresFixture.tokens(4)
        let (early, t0) = (tokens[0], Date(timeIntervalSince1970: 1_700_000_000))
        let late = tokens[1]
        let unknown = tokens[2]
        try await PostgresFixture.withStore { store async throws in
            _ = try await store.importTokens([early, late], topic: topic, environment: .production, registeredAt: t0)
            try await store.markTokens(
                [
                    (token: early, status: .unregistered, reason: .unregistered, since: t0 + 60),
                    // APNs' verdict predates the registration: the token stays active.
                    (token: late, status: .unregistered, reason: .unregistered, since: t0 - 60),
                    (token: unknown, status: .quarantined, reason: .badDeviceToken, since: t0),
                ],
                topic: topic, environment: .production
            )
            #expect(try await store.tokenStatus(early, topic: topic, environment: .production) == .unregistered)
            #expect(try await store.tokenStatus(late, topic: topic, environment: .production) == .active)
            #expect(try await store.tokenStatus(unknown, topic: topic, environment: .production) == .quarantined)
            #expect(try await store.tokenStatus(tokens[3], topic: topic, environment: .production) == nil)
            #expect(try await store.tokenStatus(early, topic: topic, environment: .sandbox) == nil)
            #expect(try await store.countTokens(topic: topic, environment: .production, status: .unregistered) == 1)

            // Registered again, but before the invalidation: still unregistered, and not paged.
            _ = try await store.importTokens([early], topic: topic, environment: .production, registeredAt: t0 + 30)
            #expect(try await store.tokenStatus(early, topic: topic, environment: .production) == .unregistered)
            #expect(try await store.activeTokens(topic: topic, environment: .production, after: nil, limit: 10) == [late])

            // Registered after the invalidation: active again.
            _ = try await store.importTokens([early, unknown], topic: topic, environment: .production, registeredAt: t0 + 120)
            #expect(try await store.tokenStatus(early, topic: topic, environment: .production) == .active)
            #expect(try await store.tokenStatus(unknown, topic: topic, environment: .production) == .active)
            #expect(Set(try await store.activeTokens(topic: topic, environment: .production, after: nil, limit: 10)) == [early, late, unknown])
        }
    }
}
