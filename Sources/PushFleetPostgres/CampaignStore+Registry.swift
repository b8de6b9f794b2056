public import Foundation
import PostgresNIO
public import PushFleetCore

extension CampaignStore {
    /// Adds tokens to the registry of `topic` and `environment`, or refreshes them, in one transaction.
    ///
    /// A token already known keeps the latest `registered_at`; if it was invalid, unregistered or
    /// quarantined, it becomes active again only when `registeredAt` is later than its `invalid_since`
    /// (the device registered anew after APNs gave up on it). Duplicates in `tokens` count once.
    /// - Returns: the number of distinct tokens written.
    public func importTokens(_ tokens: [DeviceToken], topic: String, environment: APNsEnvironment, registeredAt: Date) async throws -> Int {
        let unique = Self.distinct(tokens)
        guard !unique.isEmpty else { return 0 }
        return try await self.withTransaction("import tokens") { connection in
            let app = try await self.appID(topic: topic, environment: environment, on: connection)
            for chunk in Self.chunks(unique) {
                try await connection.query(
                    """
                    INSERT INTO device_tokens AS d (app_id, token, status, registered_at)
                    SELECT \(app), t.token, 'active', \(registeredAt) FROM unnest(\(TokenArray(chunk))) AS t(token)
                    ON CONFLICT (app_id, token) DO UPDATE SET
                        registered_at = GREATEST(d.registered_at, EXCLUDED.registered_at),
                        status = CASE WHEN d.invalid_since IS NULL OR EXCLUDED.registered_at > d.invalid_since
                                      THEN 'active' ELSE d.status END,
                        invalid_since = CASE WHEN EXCLUDED.registered_at > d.invalid_since THEN NULL ELSE d.invalid_since END,
                        invalid_reason = CASE WHEN EXCLUDED.registered_at > d.invalid_since THEN NULL ELSE d.invalid_reason END
                    """,
                    logger: self.logger
                )
            }
            return unique.count
        }
    }

    /// One page of the active tokens of `topic` and `environment`, in ascending byte order.
    /// - Parameters:
    ///   - after: the last token of the previous page; `nil` for the first page.
    ///   - limit: the most tokens to return.
    /// - Returns: at most `limit` tokens; fewer (possibly none) at the end.
    public func activeTokens(topic: String, environment: APNsEnvironment, after: DeviceToken?, limit: Int) async throws -> [DeviceToken] {
        guard limit > 0 else { return [] }
        let start = after?.byteBuffer ?? ByteBuffer()
        return try await self.withConnection("read registry tokens") { connection in
            let rows = try await connection.query(
                """
                SELECT token FROM device_tokens
                WHERE app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment.rawValue))
                  AND status = 'active' AND token > \(start)
                ORDER BY token LIMIT \(limit)
                """,
                logger: self.logger
            )
            var tokens: [DeviceToken] = []
            tokens.reserveCapacity(min(limit, 100_000))
            for try await bytes in rows.decode(ByteBuffer.self) { tokens.append(try DeviceToken(postgres: bytes)) }
            return tokens
        }
    }

    /// One page of the active tokens of `topic` and `environment` with the locale and time zone
    /// their devices registered (nil where none), in ascending byte order of the token; see
    /// ``activeTokens(topic:environment:after:limit:)``.
    public func activeRecipients(
        topic: String, environment: APNsEnvironment, after: DeviceToken?, limit: Int
    ) async throws -> [(token: DeviceToken, locale: String?, timeZone: String?)] {
        guard limit > 0 else { return [] }
        let start = after?.byteBuffer ?? ByteBuffer()
        return try await self.withConnection("read registry tokens") { connection in
            let rows = try await connection.query(
                """
                SELECT token, locale, time_zone FROM device_tokens
                WHERE app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment.rawValue))
                  AND status = 'active' AND token > \(start)
                ORDER BY token LIMIT \(limit)
                """,
                logger: self.logger
            )
            var recipients: [(token: DeviceToken, locale: String?, timeZone: String?)] = []
            recipients.reserveCapacity(min(limit, 100_000))
            for try await (bytes, locale, zone) in rows.decode((ByteBuffer, String?, String?).self) {
                recipients.append((try DeviceToken(postgres: bytes), locale, zone))
            }
            return recipients
        }
    }

    /// Sets the status of registry tokens, in one transaction, but only where the token was registered
    /// before `since`: a device that registered again after APNs' verdict stays active. Tokens the
    /// registry does not know are added with that status (and `registered_at = since`). When one token
    /// appears more than once, its latest entry counts.
    public func markTokens(
        _ tokens: [(token: DeviceToken, status: TokenStatus, reason: RejectionReason, since: Date)], topic: String, environment: APNsEnvironment
    ) async throws {
        guard !tokens.isEmpty else { return }
        // Not fenced (``LeadershipFence``): the feedback service forgets what it has handed out, so
        // a leader's marks refused would be lost, and a mark written twice or late changes nothing.
        try await LeadershipFence.$current.withValue(nil) {
            try await self.withTransaction("mark registry tokens") { connection in
                let app = try await self.appID(topic: topic, environment: environment, on: connection)
                try await self.mark(tokens.map { TokenMark(token: $0.token, status: $0.status, reason: $0.reason, since: $0.since) }, app: app, on: connection)
            }
        }
    }

    /// A token's registry status, or `nil` if the registry does not know it.
    public func tokenStatus(_ token: DeviceToken, topic: String, environment: APNsEnvironment) async throws -> TokenStatus? {
        try await self.withConnection("read a token's status") { connection in
            let rows = try await connection.query(
                """
                SELECT d.status FROM device_tokens d JOIN apps a USING (app_id)
                WHERE a.topic = \(topic) AND a.environment = \(environment.rawValue) AND d.token = \(token.byteBuffer)
                """,
                logger: self.logger
            )
            for try await status in rows.decode(String.self) { return TokenStatus(rawValue: status) }
            return nil
        }
    }
}
