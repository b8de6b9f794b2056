import Foundation
import PostgresNIO
@testable import PushFleetPostgres
import Testing

/// A store operation never holds its caller on a query postgres-nio will not answer: one written to
/// a connection that has closed is given up with an error, and a cancelled caller stops waiting even
/// while the server is still working. A regression hangs the test until its time limit.
@Suite(.timeLimit(.minutes(3))) struct PostgresAbandonTests {
    /// What a pooled connection leased just as the server went away does (the coordinator hung on it
    /// for good after a Postgres outage): the query is written after the pipeline is gone.
    @Test(arguments: ["pooled", "dedicated"])
    func aQueryOnAClosedConnectionIsGivenUp(connection kind: String) async throws {
        let endpoint = try PostgresFixture.configuration().endpoint
        try await PostgresFixture.withStore { store async throws in
            let logger = PostgresFixture.logger
            let stuck: @Sendable (PostgresConnection) async throws -> Int = { connection in
                try await connection.close()
                var answer = 0
                for try await value in try await connection.query("SELECT 1", logger: logger).decode(Int.self) { answer = value }
                return answer
            }
            let error = await #expect(throws: PostgresStoreError.self) {
                if kind == "pooled" {
                    _ = try await store.withConnection("query a closed connection", stuck)
                } else {
                    _ = try await store.withDedicatedConnection("query a closed connection", stuck)
                }
            }
            #expect(error?.code == .connectionFailed)
            #expect(error?.message.contains(endpoint) == true)
            #expect(error?.message.contains("query a closed connection") == true)
            // The pool goes on serving.
            #expect(try await store.schemaVersions().isEmpty == false)
        }
    }

    /// A leader cancelled because its lock connection broke must return, though its pooled query is
    /// still running on the server (postgres-nio does not cancel a query when its task is cancelled).
    @Test func aCancelledCallerStopsWaitingForARunningQuery() async throws {
        let marker = "pushfleet-abandon-\(UUID())"
        try await PostgresFixture.withStore { store async throws in
            let logger = PostgresFixture.logger
            let sleeping = Task {
                try await store.withConnection("sleep for an hour") { connection in
                    try await connection.query("SELECT pg_sleep(3600) -- \(unescaped: marker)", logger: logger)
                }
            }
            let backend = try await Self.backend(running: marker, store: store)
            sleeping.cancel()
            await #expect(throws: CancellationError.self) { try await sleeping.value }
            _ = try await store.withConnection("stop the sleeping query") { connection in
                try await connection.query("SELECT pg_terminate_backend(\(backend))", logger: logger)
            }
        }
    }

    /// The process id of the backend running the query that contains `marker`, once it runs.
    private static func backend(running marker: String, store: CampaignStore) async throws -> Int32 {
        let logger = PostgresFixture.logger
        while true {
            let found = try await store.withConnection("find the sleeping query") { connection -> Int32? in
                let rows = try await connection.query(
                    "SELECT pid FROM pg_stat_activity WHERE query LIKE \("%" + marker) AND pid <> pg_backend_pid()", logger: logger
                )
                var pid: Int32? = nil
                for try await value in rows.decode(Int32.self) { pid = value }
                return pid
            }
            if let found { return found }
            try await Task.sleep(for: .milliseconds(50))
        }
    }
}
