import PostgresNIO
public import PushFleetCore

extension CampaignStore {
    /// The number of registry tokens of `topic` and `environment` that have `status`.
    public func countTokens(topic: String, environment: APNsEnvironment, status: TokenStatus) async throws -> Int {
        try await self.withConnection("count registry tokens") { connection in
            let rows = try await connection.query(
                """
                SELECT count(*) FROM device_tokens
                WHERE app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment.rawValue))
                  AND status = \(status.rawValue)
                """,
                logger: self.logger
            )
            for try await count in rows.decode(Int.self) { return count }
            return 0
        }
    }
}
