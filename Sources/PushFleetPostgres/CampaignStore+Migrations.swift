import PostgresNIO

extension CampaignStore {
    /// Creates the schema, or brings it up to date, and records each applied version in
    /// `schema_migrations`. Idempotent; safe when several processes start at once, because it runs in one
    /// transaction under an advisory transaction lock (the losers wait, then find nothing left to do).
    ///
    /// Uses a dedicated connection, so it works before ``run()`` starts and fails at once, naming
    /// `host:port`, when the server is unreachable.
    /// - Returns: nothing; throws ``PostgresStoreError`` on failure, leaving the schema as it was.
    public func migrate() async throws {
        try await self.migrate(through: nil)
    }

    /// ``migrate()``, stopping after version `last` when it is given: an upgrade's test starts from
    /// an older schema (`@testable import`).
    func migrate(through last: Int?) async throws {
        try await self.withDedicatedConnection("migrate the schema") { connection in
            try await self.transaction(on: connection) { connection in
                try await connection.query("SELECT pg_advisory_xact_lock(\(Schema.migrationLockKey))", logger: self.logger)
                try await connection.query(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version    integer PRIMARY KEY,
                        name       text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now()
                    )
                    """,
                    logger: self.logger
                )
                var applied: Set<Int> = []
                for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: self.logger)
                    .decode(Int.self)
                {
                    applied.insert(version)
                }
                for migration in Schema.migrations where !applied.contains(migration.version) && migration.version <= last ?? .max {
                    for statement in migration.statements {
                        try await connection.query(statement, logger: self.logger)
                    }
                    try await connection.query(
                        "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))",
                        logger: self.logger
                    )
                    self.logger.info("applied schema migration", metadata: ["version": "\(migration.version)", "name": "\(migration.name)"])
                }
            }
        }
    }

    /// The schema versions applied so far, ascending.
    public func schemaVersions() async throws -> [Int] {
        try await self.withConnection("read the schema version") { connection in
            var versions: [Int] = []
            let rows = try await connection.query("SELECT version FROM schema_migrations ORDER BY version", logger: self.logger)
            for try await version in rows.decode(Int.self) { versions.append(version) }
            return versions
        }
    }
}
