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
    ///   owner goes to its first registration, whatever the import's date.
    /// - A token APNs had declared invalid, unregistered or quarantined becomes active again only
    ///   if `registeredAt` is later than that verdict: the device registered anew after APNs gave
    ///   up on it. An older registration leaves it as APNs said.
    /// - Throws: ``PostgresStoreError/Code/invalidInput`` for an empty or over-long user, an
    ///   unknown platform, a bad topic or environment, or a registration time more than five
    ///   minutes ahead, before anything is written.
    public func registerDevice(_ registration: DeviceRegistration) async throws -> RegisteredDevice {
        try Self.checkIdentifier(registration.user, "user id")
        if let platform = registration.platform, !DeviceRegistration.platforms.contains(platform) {
            throw PostgresStoreError.invalidInput(
                "platform '\(platform)' is not one of \(DeviceRegistration.platforms.sorted().joined(separator: ", "))"
            )
        }
        if let problem = registration.locale.flatMap(DeviceRegistration.problem(locale:))
            ?? registration.timeZone.flatMap(DeviceRegistration.problem(timeZone:))
        {
            throw PostgresStoreError.invalidInput(problem)
        }
        guard registration.registeredAt.timeIntervalSinceNow <= Self.registrationClockSkew else {
            // It would hold the phone, and outrank APNs' verdicts on it, until that time.
            throw PostgresStoreError.invalidInput(
                "the registration time \(registration.registeredAt) is \(Int(registration.registeredAt.timeIntervalSinceNow)) s in the future"
            )
        }
        return try await self.withTransaction("register a device") { connection in
            let app = try await self.appID(topic: registration.topic, environment: registration.environment, on: connection)
            try await connection.query("INSERT INTO users (user_id) VALUES (\(registration.user)) ON CONFLICT DO NOTHING", logger: self.logger)
            // A concurrent removeDevice may delete the row between the two steps: insert it again then.
            for _ in 0..<3 {
                if try await self.insertDevice(registration, app: app, on: connection) {
                    return RegisteredDevice(status: .active, owner: registration.user)
                }
                if let registered = try await self.updateDevice(registration, app: app, on: connection) { return registered }
            }
            throw PostgresStoreError.queryFailed(
                self.configuration.endpoint, "register a device", "the token's row was removed three times while it was being registered"
            )
        }
    }

    /// How far in the future a registration time may be: clocks of app servers differ a little.
    static let registrationClockSkew: TimeInterval = 300

    /// Adds the device if the registry does not know its token; whether it did. Waits for a
    /// concurrent first registration of the token to commit (the row exists after).
    private func insertDevice(_ registration: DeviceRegistration, app: Int64, on connection: PostgresConnection) async throws -> Bool {
        let at = registration.registeredAt
        let inserted = try await connection.query(
            """
            INSERT INTO device_tokens (app_id, token, status, registered_at, user_id, owned_at, platform, locale, time_zone)
            VALUES (\(app), \(registration.token.byteBuffer), 'active', \(at), \(registration.user), \(at), \(registration.platform),
                    \(registration.locale), \(registration.timeZone))
            ON CONFLICT (app_id, token) DO NOTHING RETURNING 1
            """,
            logger: self.logger
        )
        for try await _ in inserted.decode(Int.self) { return true }
        return false
    }

    /// Registers a device the registry knows, under a row lock; `nil` if its row is gone.
    ///
    /// Ownership goes by `owned_at`, the time of the registration that gave the phone its owner,
    /// which only registrations write (imports raise `registered_at` too); revival by
    /// `invalid_since`, APNs' verdict.
    private func updateDevice(_ registration: DeviceRegistration, app: Int64, on connection: PostgresConnection) async throws -> RegisteredDevice? {
        let token = registration.token.byteBuffer
        let at = registration.registeredAt
        var current: (owner: String?, ownedAt: Date?)?
        let rows = try await connection.query(
            "SELECT user_id, owned_at FROM device_tokens WHERE app_id = \(app) AND token = \(token) FOR UPDATE", logger: self.logger
        )
        for try await row in rows.decode((String?, Date?).self) { current = row }
        guard let current else { return nil }
        // The phone goes to this registration unless it has an owner by a later one.
        let takes = current.owner == nil || current.ownedAt.map { at >= $0 } ?? true
        let owner = takes ? registration.user : current.owner!
        let ownedAt = takes ? at : current.ownedAt
        let updated = try await connection.query(
            """
            UPDATE device_tokens SET
                user_id = \(owner),
                owned_at = \(ownedAt),
                platform = CASE WHEN \(takes) THEN \(registration.platform) ELSE platform END,
                locale = CASE WHEN \(takes) THEN COALESCE(\(registration.locale), locale) ELSE locale END,
                time_zone = CASE WHEN \(takes) THEN COALESCE(\(registration.timeZone), time_zone) ELSE time_zone END,
                registered_at = GREATEST(registered_at, \(at)),
                status = CASE WHEN invalid_since IS NULL OR \(at) > invalid_since THEN 'active' ELSE status END,
                invalid_reason = CASE WHEN \(at) > invalid_since THEN NULL ELSE invalid_reason END,
                invalid_since = CASE WHEN \(at) > invalid_since THEN NULL ELSE invalid_since END
            WHERE app_id = \(app) AND token = \(token)
            RETURNING status
            """,
            logger: self.logger
        )
        for try await status in updated.decode(String.self) {
            guard let status = TokenStatus(rawValue: status) else { break }
            return RegisteredDevice(status: status, owner: owner, previousOwner: current.owner != owner ? current.owner : nil)
        }
        throw PostgresStoreError.queryFailed(self.configuration.endpoint, "register a device", "the locked token's row was not returned")
    }

    /// Removes a device from the registry: no user's or group's notification and no later
    /// `launch --from-registry` reaches it until it is registered or imported again. Campaigns
    /// launched before keep their audience.
    /// - Returns: whether the registry knew the token.
    public func removeDevice(_ token: DeviceToken, topic: String, environment: APNsEnvironment) async throws -> Bool {
        try await self.withConnection("remove a device") { connection in
            let rows = try await connection.query(
                """
                DELETE FROM device_tokens
                WHERE app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment.rawValue))
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
            // Locks the group's row, new or not: concurrent calls for one group take turns, and
            // each one's DELETE sees the members the one before committed.
            try await connection.query(
                "INSERT INTO device_groups (group_id) VALUES (\(group)) ON CONFLICT (group_id) DO UPDATE SET group_id = EXCLUDED.group_id",
                logger: self.logger
            )
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
    public func activeTokens(of audience: DeviceAudience, topic: String, environment: APNsEnvironment) async throws -> [DeviceToken] {
        try await self.withConnection("read an audience's devices") { connection in
            // Each by the owner index: a ring reads its members' rows, never the app's whole registry.
            let rows: PostgresRowSequence
            switch audience {
            case .user(let user):
                rows = try await connection.query(
                    """
                    SELECT d.token FROM device_tokens d
                    WHERE d.user_id = \(user)
                      AND d.app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment.rawValue))
                      AND d.status = 'active'
                    ORDER BY d.token
                    """,
                    logger: self.logger
                )
            case .group(let group):
                rows = try await connection.query(
                    """
                    SELECT d.token FROM group_members m JOIN device_tokens d ON d.user_id = m.user_id
                    WHERE m.group_id = \(group)
                      AND d.app_id = (SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment.rawValue))
                      AND d.status = 'active'
                    ORDER BY d.token
                    """,
                    logger: self.logger
                )
            }
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
