public import Foundation
import PostgresNIO
public import PushFleetCore

extension CampaignStore {
    /// The columns of a ``CampaignRecord``, rejections as two parallel arrays. A constant: callers add
    /// their `WHERE` with bound values.
    static let selectCampaigns = """
        SELECT c.campaign_id, a.topic, a.environment, c.state, c.total_tokens, c.shard_count, c.accepted, c.resent,
               c.cancelled, c.done_shards, c.duplicates_dropped, c.created_at, c.started_at, c.finished_at, c.last_event_id,
               c.retried, c.dead_shards, c.state_reason, c.auto_resume_at,
               ARRAY(SELECT r.reason FROM campaign_rejections r WHERE r.campaign_id = c.campaign_id ORDER BY r.reason),
               ARRAY(SELECT r.count FROM campaign_rejections r WHERE r.campaign_id = c.campaign_id ORDER BY r.reason),
               c.queue_generation, c.fold_sequence, c.kind, c.rate_limit, c.starts_at, c.parent_id, c.variant
        FROM campaigns c JOIN apps a USING (app_id)
        """

    /// The environment of campaign `id`'s app as its row spells it (the `apps` table's check
    /// allows only the two).
    static func environment(_ text: String, of id: UUID) throws -> APNsEnvironment {
        guard let environment = APNsEnvironment(rawValue: text) else {
            throw PostgresStoreError.invalidInput("campaign \(id) has an unknown environment '\(text)'")
        }
        return environment
    }

    static func record(_ row: PostgresRow) throws -> CampaignRecord {
        let (id, topic, environment, state, total, shards, accepted, resent, cancelled, done, duplicates) = try row.decode(
            (UUID, String, String, String, Int, Int, Int, Int, Int, Int, Int).self
        )
        // The rest by cell, to keep the tuple short.
        let cells = Array(row)
        let (createdAt, startedAt, finishedAt) = (try cells[11].decode(Date.self), try cells[12].decode(Date?.self), try cells[13].decode(Date?.self))
        let (lastEventID, retried) = (try cells[14].decode(String.self), try cells[15].decode(Int.self))
        let (dead, reason) = (try cells[16].decode([Int].self), try cells[17].decode(String?.self))
        let autoResumeAt = try cells[18].decode(Date?.self)
        let (reasons, counts) = (try cells[19].decode([String].self), try cells[20].decode([Int].self))
        guard let state = CampaignState(rawValue: state) else {
            throw PostgresStoreError.invalidInput("campaign \(id) has an unknown state '\(state)'")
        }
        var record = CampaignRecord(
            id: id, topic: topic, environment: try Self.environment(environment, of: id), state: state, total: total, shardCount: shards,
            accepted: accepted, rejected: Dictionary(zip(reasons, counts), uniquingKeysWith: max), resent: resent,
            retried: retried, cancelled: cancelled, doneShards: done, duplicatesDropped: duplicates, createdAt: createdAt,
            startedAt: startedAt, finishedAt: finishedAt, lastEventID: lastEventID
        )
        record.deadShards = dead
        record.stateReason = reason
        record.autoResumeAt = autoResumeAt
        record.queueGeneration = try cells[21].decode(Int.self)
        record.foldSequence = try cells[22].decode(Int.self)
        let kind = try cells[23].decode(String.self)
        guard let kind = CampaignKind(rawValue: kind) else {
            throw PostgresStoreError.invalidInput("campaign \(id) has an unknown kind '\(kind)'")
        }
        record.kind = kind
        record.rateLimit = try cells[24].decode(Int?.self)
        record.startsAt = try cells[25].decode(Date?.self)
        record.splitID = try cells[26].decode(UUID?.self)
        record.variant = try cells[27].decode(String?.self)
        return record
    }

    /// The campaign as launch recorded it (its definition, shard sizes), or `nil`. For
    /// rebuilding a campaign's Redis half from Postgres.
    public func launchedCampaign(_ id: UUID) async throws -> NewCampaign? {
        try await self.withConnection("read the definition of campaign \(id)") { connection in
            let rows = try await connection.query(
                """
                SELECT a.topic, a.environment, c.payload, c.push_type, c.priority, c.expiration, c.collapse_id,
                       c.shard_size, c.total_tokens, c.duplicates_dropped,
                       ARRAY(SELECT s.token_count FROM campaign_shards s WHERE s.campaign_id = c.campaign_id ORDER BY s.shard),
                       c.kind, c.audience, c.rate_limit, c.starts_at, c.parent_id, c.variant, c.personalized
                FROM campaigns c JOIN apps a USING (app_id) WHERE c.campaign_id = \(id)
                """,
                logger: self.logger
            )
            for try await row in rows {
                let (topic, environment, payload, pushType, priority, expiration, collapseID, shardSize, total, duplicates, shards) =
                    try row.decode((String, String, ByteBuffer, String, Int, Int, String?, Int, Int, Int, [Int]).self)
                let cells = Array(row)
                let (kind, audience) = (try cells[11].decode(String.self), try cells[12].decode(String?.self))
                let definition = CampaignDefinition(
                    topic: topic, environment: try Self.environment(environment, of: id), payload: Array(payload.readableBytesView),
                    pushType: pushType, priority: priority, expiration: expiration, collapseID: collapseID,
                    kind: CampaignKind(rawValue: kind) ?? .campaign, rateLimit: try cells[13].decode(Int?.self),
                    personalized: try cells[17].decode(Bool.self)
                )
                var campaign = NewCampaign(
                    id: id, definition: definition, shardSize: shardSize, shardTokenCounts: shards, totalTokens: total, duplicatesDropped: duplicates
                )
                campaign.audience = audience
                campaign.startsAt = try cells[14].decode(Date?.self)
                if let split = try cells[15].decode(UUID?.self), let variant = try cells[16].decode(String?.self) {
                    campaign.split = SplitMembership(id: split, variant: variant)
                }
                return campaign
            }
            return nil
        }
    }

    /// The tokens APNs rejected in a campaign, in ascending byte order, one page at a time: each once,
    /// with its first recorded rejection. No index is keyed by the token (schema 16): each page
    /// unpacks and sorts the campaign's remaining rejections, which suits tests and small
    /// campaigns, not an export of millions.
    /// - Parameters:
    ///   - after: the last token of the previous page; `nil` for the first page.
    ///   - limit: the most rows to return. Defaults to 10,000.
    public func tokenFailures(campaign id: UUID, after: DeviceToken? = nil, limit: Int = 10_000) async throws -> [AppliedRejection] {
        guard limit > 0 else { return [] }
        let start = after?.byteBuffer ?? ByteBuffer()
        return try await self.withConnection("read token failures of campaign \(id)") { connection in
            let rows = try await connection.query(
                """
                SELECT DISTINCT ON (token) token, reason, shard, apns_timestamp FROM token_failures
                WHERE campaign_id = \(id) AND token > \(start) ORDER BY token, batch, position LIMIT \(limit)
                """,
                logger: self.logger
            )
            var failures: [AppliedRejection] = []
            for try await (token, reason, shard, timestamp) in rows.decode((ByteBuffer, String, Int, Int64?).self) {
                failures.append(
                    AppliedRejection(token: try DeviceToken(postgres: token), reason: RejectionReason(reason), shard: shard, apnsTimestampMilliseconds: timestamp)
                )
            }
            return failures
        }
    }
}
