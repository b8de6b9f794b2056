import Foundation
import PostgresNIO
public import PushFleetCore

/// Users, their devices and the groups they share: the registry the doorbell lane sends from. A
/// device is a row of the token registry (``importTokens(_:topic:environment:registeredAt:)``)
/// that names its owner, so APNs' answers and the feedback service mark it as they mark any token.
extension CampaignStore {
    /// Registers a device to a user, in one transaction.
    ///
    /// - The user is created if new.
    /// - A token new to the registry is added, active.
    /// - A token registered before moves to `registration.user` (one phone, one owner) unless the
    ///   registry holds a later registration of it, which keeps it. A token imported without an
    ///   owner goes to its first registration.
    /// - A token APNs had declared invalid, unregistered or quarantined becomes active again only
    ///   if `registeredAt` is later than that verdict: the device registered anew after APNs gave
    ///   up on it. An older registration leaves it as APNs said.
    /// - Throws: ``PostgresStoreError/Code/invalidInput`` for an empty or over-long user, an
    ///   unknown platform, or a bad topic or environment, before anything is written.
    public func registerDevice(_ registration: DeviceRegistration) async throws -> RegisteredDevice {
        try Self.checkIdentifier(registration.user, "user id")
        if let platform = registration.platform, !DeviceRegistration.platforms.contains(platform) {
            throw PostgresStoreError.invalidInput(
                "platform '\(platform)' is not one of \(DeviceRegistration.platforms.sorted().joined(separator: ", "))"
            )
        }
        return try await self.withTransaction("register a device") { connection in
            let app = try await self.appID(topic: registration.topic, environment: registration.environment, on: connection)
            let token = registration.token.byteBuffer
            let user = registration.user
            let at = registration.registeredAt
            try await connection.query("INSERT INTO users (user_id) VALUES (\(user)) ON CONFLICT DO NOTHING", logger: self.logger)
            // Waits for a concurrent first registration of the token to commit; the row exists after.
            let inserted = try await connection.query(
                """
                INSERT INTO device_tokens (app_id, token, status, registered_at, user_id, platform)
                VALUES (\(app), \(token), 'active', \(at), \(user), \(registration.platform))
                ON CONFLICT (app_id, token) DO NOTHING RETURNING 1
                """,
                logger: self.logger
            )
            for try await _ in inserted.decode(Int.self) { return RegisteredDevice(status: .active, owner: user) }

            var previous: String?
            let current = try await connection.query(
                "SELECT user_id FROM device_tokens WHERE app_id = \(app) AND token = \(token) FOR UPDATE", logger: self.logger
            )
            for try await owner in current.decode(String?.self) { previous = owner }
            let updated = try await connection.query(
                """
                UPDATE device_tokens SET
                    user_id = CASE WHEN user_id IS NULL OR \(at) >= registered_at THEN \(user) ELSE user_id END,
                    platform = CASE WHEN user_id IS NULL OR \(at) >= registered_at THEN \(registration.platform) ELSE platform END,
                    registered_at = GREATEST(registered_at, \(at)),
                    status = CASE WHEN invalid_since IS NULL OR \(at) > invalid_since THEN 'active' ELSE status END,
                    invalid_reason = CASE WHEN \(at) > invalid_since THEN NULL ELSE invalid_reason END,
                    invalid_since = CASE WHEN \(at) > invalid_since THEN NULL ELSE invalid_since END
                WHERE app_id = \(app) AND token = \(token)
                RETURNING status, user_id
                """,
                logger: self.logger
            )
            for try await (status, owner) in updated.decode((String, String).self) {
                guard let status = TokenStatus(rawValue: status) else { break }
                return RegisteredDevice(status: status, owner: owner, previousOwner: previous != owner ? previous : nil)
            }
            throw PostgresStoreError.queryFailed(self.configuration.endpoint, "register a device", "the token's row was not returned")
        }
    }

    /// Removes a device from the registry: it gets nothing more, from any lane or campaign from
    /// the registry, until it is registered or imported again.
    /// - Returns: whether the registry knew the token.
    public func removeDevice(_ token: DeviceToken, topic: String, environment: String) async throws -> Bool {
        try await self.withConnection("remove a device") { connection in
            let rows = try await connection.query(
                """
                DELETE FROM device_tokens
                WHERE app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment))
                  AND token = \(token.byteBuffer)
                RETURNING 1
                """,
                logger: self.logger
            )
            for try await _ in rows.decode(Int.self) { return true }
            return false
        }
    }

    /// Makes `users` the members of `group`, exactly, in one transaction. The group and the users
    /// are created if new; members not in `users` leave it. An empty list empties the group.
    /// - Throws: ``PostgresStoreError/Code/invalidInput`` for an empty or over-long id.
    public func setGroupMembers(_ group: String, users: [String]) async throws {
        try Self.checkIdentifier(group, "group id")
        for user in users { try Self.checkIdentifier(user, "user id") }
        // Sorted, so concurrent writers take row locks in one order.
        let members = Array(Set(users)).sorted()
        try await self.withTransaction("set a group's members") { connection in
            try await connection.query("INSERT INTO device_groups (group_id) VALUES (\(group)) ON CONFLICT DO NOTHING", logger: self.logger)
            try await connection.query(
                "INSERT INTO users (user_id) SELECT unnest(\(members)::text[]) ON CONFLICT DO NOTHING", logger: self.logger
            )
            try await connection.query(
                "DELETE FROM group_members WHERE group_id = \(group) AND NOT (user_id = ANY(\(members)::text[]))", logger: self.logger
            )
            try await connection.query(
                "INSERT INTO group_members (group_id, user_id) SELECT \(group), unnest(\(members)::text[]) ON CONFLICT DO NOTHING",
                logger: self.logger
            )
        }
    }

    /// The members of `group`, in ascending order; empty for a group that does not exist.
    public func groupMembers(_ group: String) async throws -> [String] {
        try await self.withConnection("read a group's members") { connection in
            let rows = try await connection.query(
                "SELECT user_id FROM group_members WHERE group_id = \(group) ORDER BY user_id", logger: self.logger
            )
            var users: [String] = []
            for try await user in rows.decode(String.self) { users.append(user) }
            return users
        }
    }

    /// The active tokens of `audience` for `topic` and `environment`, in ascending byte order: what
    /// a notification to a user or a group goes to. Devices APNs declared dead are left out.
    public func activeTokens(of audience: DeviceAudience, topic: String, environment: String) async throws -> [DeviceToken] {
        let (users, group): ([String], String?) =
            switch audience {
            case .user(let user): ([user], nil)
            case .group(let group): ([], group)
            }
        return try await self.withConnection("read an audience's devices") { connection in
            let rows = try await connection.query(
                """
                SELECT d.token FROM device_tokens d
                WHERE d.app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment))
                  AND d.status = 'active'
                  AND (d.user_id = ANY(\(users)::text[]) OR d.user_id IN (SELECT user_id FROM group_members WHERE group_id = \(group)))
                ORDER BY d.token
                """,
                logger: self.logger
            )
            var tokens: [DeviceToken] = []
            for try await bytes in rows.decode(ByteBuffer.self) { tokens.append(try DeviceToken(postgres: bytes)) }
            return tokens
        }
    }

    /// A user or group id: 1 to 200 bytes, as the schema's checks want them.
    static func checkIdentifier(_ id: String, _ kind: String) throws {
        guard (1...200).contains(id.utf8.count) else {
            throw PostgresStoreError.invalidInput("the \(kind) is \(id.utf8.count) bytes; it must be 1 to 200")
        }
    }
}
