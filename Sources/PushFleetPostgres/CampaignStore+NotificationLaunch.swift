public import Foundation
import PostgresNIO
public import PushFleetCore

/// A ring's launch in one Postgres round trip: the audience's devices read and the notification
/// recorded to them by the same statement.
extension CampaignStore {
    /// What ``createNotification(id:definition:to:launch:shardSize:maximumTokens:)`` found and did.
    public struct CreatedNotification: Sendable, Hashable {
        /// The audience's active devices in byte order, at most `maximumTokens + 1` of them; shard
        /// `i` holds `tokens[i * shardSize ..< (i + 1) * shardSize]`.
        public var tokens: [DeviceToken]
        /// How many active devices the audience has.
        public var devices: Int
        /// Whether the notification was recorded: false when there was no device, more than the
        /// maximum, one whose token is not of the required size, or the id was taken.
        public var created: Bool
    }

    /// Reads the active devices of a user or a group in `definition`'s topic and environment and,
    /// if there are 1 to `maximumTokens` and every token is `requiredTokenSize` bytes (when given),
    /// records the notification to them in the same statement:
    /// its campaign row (`pending`, of kind ``CampaignKind/notification``, by `launch`), its shards
    /// of `shardSize` tokens, and their tokens as `launch` staged them (the durable copy a lost
    /// queue is rebuilt from), as ``createCampaign(_:tokens:)`` does for tokens in hand.
    /// - Throws: ``PostgresStoreError/Code/invalidInput`` for a bad topic, user or group id.
    public func createNotification(
        id: UUID, definition: CampaignDefinition, to audience: DeviceAudience, launch: String, shardSize: Int, maximumTokens: Int,
        requiredTokenSize: Int? = nil
    ) async throws -> CreatedNotification {
        precondition(shardSize > 0 && maximumTokens > 0)
        try Self.checkTopic(definition.topic)
        let (user, group, label): (String?, String?, String)
        switch audience {
        case .user(let id):
            try Self.checkIdentifier(id, "user id")
            (user, group, label) = (id, nil, "user:\(id)")
        case .group(let id):
            try Self.checkIdentifier(id, "group id")
            (user, group, label) = (nil, id, "group:\(id)")
        }
        let statement = NotificationStatement(
            id: id, definition: definition, owner: user ?? group!, label: label, launch: launch, shardSize: shardSize,
            maximumTokens: maximumTokens, requiredTokenSize: requiredTokenSize
        )
        return try await self.withConnection("create a notification to \(label)") { connection in
            let rows = user != nil
                ? try await connection.execute(NotificationToUser(statement), logger: self.logger)
                : try await connection.execute(NotificationToGroup(statement), logger: self.logger)
            var result = CreatedNotification(tokens: [], devices: 0, created: false)
            for try await (created, devices, token) in rows {
                (result.created, result.devices) = (created == 1, Int(devices))
                if let token { result.tokens.append(try DeviceToken(postgres: token)) }
            }
            return result
        }
    }
}

/// The values of a notification's statement (``CampaignStore/createNotification(id:definition:to:launch:shardSize:maximumTokens:)``).
///
/// Prepared once per connection, a statement of its own for users and for groups (no branch left
/// to a generic plan): a ring's statement is not parsed and planned again. On an idle server with
/// warm caches that is 0.2 ms of Postgres' time a ring instead of 0.6 ms; under a campaign's load,
/// where a ring waits for the CPU, the least work is the shortest wait.
struct NotificationStatement: Sendable {
    let id: UUID
    let definition: CampaignDefinition
    /// The user, or the group.
    let owner: String
    let label: String
    let launch: String
    let shardSize: Int
    let maximumTokens: Int
    let requiredTokenSize: Int?

    /// `$3` is the user or the group; `members` selects the users whose devices it goes to.
    static func sql(members: String) -> String {
        """
        WITH app AS (
            SELECT app_id FROM apps WHERE topic = $1 AND environment = $2
        ), members AS (
            \(members)
        ), devices AS (
            SELECT t.token, (row_number() OVER (ORDER BY t.token) - 1) / $4 AS shard
            FROM members JOIN device_tokens t ON t.user_id = members.user_id
            WHERE t.app_id = (SELECT app_id FROM app) AND t.status = 'active'
        ), shards AS (
            SELECT shard, count(*) AS tokens,
                   string_agg(set_byte(decode('00', 'hex'), 0, length(token)) || token, ''::bytea ORDER BY token) AS packed
            FROM devices GROUP BY shard
        ), created AS (
            INSERT INTO campaigns (campaign_id, app_id, payload, push_type, priority, expiration, collapse_id,
                                   shard_size, shard_count, total_tokens, duplicates_dropped, kind, audience, launch,
                                   rate_limit, starts_at, parent_id, variant, personalized)
            SELECT $5, app.app_id, $6, $7, $8, $9, $10, $4, (SELECT count(*) FROM shards), (SELECT count(*) FROM devices), 0,
                   'notification', $11, $12, $13, NULL, NULL, NULL, false
            FROM app
            WHERE (SELECT count(*) FROM devices) BETWEEN 1 AND $14
              AND ($15::bigint IS NULL OR NOT EXISTS (SELECT 1 FROM devices WHERE length(token) <> $15))
            ON CONFLICT (campaign_id) DO NOTHING
            RETURNING campaign_id
        ), counted AS (
            INSERT INTO campaign_shards (campaign_id, shard, token_count)
            SELECT created.campaign_id, s.shard, s.tokens FROM created, shards s
        ), stored AS (
            INSERT INTO campaign_shard_tokens (campaign_id, launch, shard, tokens)
            SELECT created.campaign_id, $12, s.shard, s.packed FROM created, shards s
        )
        SELECT (SELECT count(*) FROM created), (SELECT count(*) FROM devices), d.token
        FROM (SELECT 1) AS one LEFT JOIN (SELECT token FROM devices ORDER BY token LIMIT $14 + 1) AS d ON true
        ORDER BY d.token
        """
    }

    /// The types of `$1`…`$15`, declared: a statement prepared with a null collapse id or rate
    /// limit would otherwise keep the type Postgres guessed for it.
    static let types: [PostgresDataType] = [.text, .text, .text, .int8, .uuid, .bytea, .text, .int8, .int8, .text, .text, .text, .int8, .int8, .int8]

    func bindings() -> PostgresBindings {
        let d = self.definition
        var bindings = PostgresBindings(capacity: 15)
        bindings.append(d.topic)
        bindings.append(d.environment.rawValue)
        bindings.append(self.owner)
        bindings.append(self.shardSize)
        bindings.append(self.id)
        bindings.append(ByteBuffer(bytes: d.payload))
        bindings.append(d.pushType)
        bindings.append(d.priority)
        bindings.append(d.expiration)
        bindings.append(d.collapseID)
        bindings.append(self.label)
        bindings.append(self.launch)
        bindings.append(d.rateLimit)
        bindings.append(self.maximumTokens)
        bindings.append(self.requiredTokenSize)
        return bindings
    }
}

/// Whether it was recorded (1 or 0), how many devices there are, and a device (nil when there is none).
private typealias NotificationRow = (Int64, Int64, ByteBuffer?)

private struct NotificationToUser: PostgresPreparedStatement {
    static let name = "pushfleet_notification_to_user"
    static let sql = NotificationStatement.sql(members: "SELECT $3::text AS user_id")
    static let bindingDataTypes = NotificationStatement.types
    let statement: NotificationStatement
    init(_ statement: NotificationStatement) { self.statement = statement }
    func makeBindings() -> PostgresBindings { self.statement.bindings() }
    func decodeRow(_ row: PostgresRow) throws -> NotificationRow { try row.decode(NotificationRow.self) }
}

private struct NotificationToGroup: PostgresPreparedStatement {
    static let name = "pushfleet_notification_to_group"
    static let sql = NotificationStatement.sql(members: "SELECT m.user_id FROM group_members m WHERE m.group_id = $3")
    static let bindingDataTypes = NotificationStatement.types
    let statement: NotificationStatement
    init(_ statement: NotificationStatement) { self.statement = statement }
    func makeBindings() -> PostgresBindings { self.statement.bindings() }
    func decodeRow(_ row: PostgresRow) throws -> NotificationRow { try row.decode(NotificationRow.self) }
}