import Foundation
import PostgresNIO

extension CampaignStore {
    /// Ends the server session that holds the leadership lock `name`, as a Postgres restart or an
    /// operator's `pg_terminate_backend` would. For fault-injection tests (`@testable import`).
    /// - Returns: whether a session was ended.
    func terminateLeader(named name: String) async throws -> Bool {
        // pg_locks shows a bigint advisory key as its high half in classid, its low half in objid.
        let key = UInt64(bitPattern: Self.lockKey(name))
        return try await self.withConnection("terminate the leader of \(name)") { connection in
            let rows = try await connection.query(
                """
                SELECT pg_terminate_backend(pid) FROM pg_locks
                WHERE locktype = 'advisory' AND granted AND objsubid = 1
                  AND classid::bigint = \(Int64(key >> 32)) AND objid::bigint = \(Int64(key & 0xFFFF_FFFF))
                """,
                logger: self.logger
            )
            var terminated = false
            for try await ended in rows.decode(Bool.self) { terminated = terminated || ended }
            return terminated
        }
    }

    /// Makes a campaign's token failures look `seconds` older, for retention tests (`@testable import`).
    func ageTokenFailures(campaign id: UUID, bySeconds seconds: Int) async throws {
        try await self.withConnection("age the token failures of \(id)") { connection in
            _ = try await connection.query(
                "UPDATE token_failure_batches SET observed_at = observed_at - make_interval(secs => \(Double(seconds))) WHERE campaign_id = \(id)",
                logger: self.logger
            )
        }
    }
}

extension CampaignStore {
    /// How many rejections a campaign has recorded (`token_failures` rows), duplicates included (``tokenFailures(campaign:after:limit:)``
    /// reads one per token). For tests (`@testable import`).
    func tokenFailureRowCount(campaign id: UUID) async throws -> Int {
        try await self.withConnection("count the token failure rows of \(id)") { connection in
            let rows = try await connection.query("SELECT count(*) FROM token_failures WHERE campaign_id = \(id)", logger: self.logger)
            for try await count in rows.decode(Int.self) { return count }
            return 0
        }
    }

    /// Runs one statement of SQL written by a test, such as `CREATE DATABASE` (`@testable import`).
    func execute(testSQL sql: String) async throws {
        try await self.withConnection("run a test's statement") { connection in
            _ = try await connection.query(PostgresQuery(unsafeSQL: sql), logger: self.logger)
        }
    }
}

extension CampaignStore {
    /// A transaction of two statements with `pause` between them, as a process frozen inside a
    /// transaction leaves it (`@testable import`).
    func transaction(pausingFor pause: Duration) async throws {
        try await self.withTransaction("a transaction that pauses for \(pause)") { connection in
            _ = try await connection.query("SELECT 1", logger: self.logger)
            try await Task.sleep(for: pause)
            _ = try await connection.query("SELECT 1", logger: self.logger)
        }
    }
}
