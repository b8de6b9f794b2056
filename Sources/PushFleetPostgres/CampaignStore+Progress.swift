import Foundation
import PostgresNIO
import PushFleetCore

extension CampaignStore {
    /// Folds one coordinator round into Postgres, in one transaction that holds the campaign's row lock.
    ///
    /// Counters and shard cursors are absolute and only ever raised. They come from one Redis
    /// snapshot, and every one of them only grows in Redis, so Postgres always holds one consistent
    /// snapshot (the newest of any two written, field by field). `in_flight` and the shards' `sent`
    /// marks are written only from a snapshot numbered above the stored one. Events (rejections and
    /// finished shards) are applied at most once: an update whose ``ProgressUpdate/lastEventID`` is not
    /// newer than the stored one (Redis stream order: milliseconds, then sequence; `0-0` lowest) is
    /// skipped whole, unless it carries no events (a counters-only update), whose counters are written.
    ///
    /// Applying events appends `token_failures` rows (one per rejection), and marks the rejected
    /// tokens the registry holds: `BadDeviceToken` and `DeviceTokenNotForTopic` quarantined, `InvalidToken`
    /// invalid, `Unregistered` and `ExpiredToken` unregistered, effective at APNs' timestamp or now; a
    /// token registered after that time stays active. Finished shards are marked `done`.
    /// A finished shard's event marks it done but leaves its cursor to the snapshot (the event may
    /// be newer than the snapshot's counters).
    /// - Returns: `false` if the update was skipped as already applied.
    /// - Throws: ``PostgresStoreError`` with code `queueRebuilt` when the update was read from an
    ///   earlier generation of the queue (``ProgressUpdate/generation``); nothing is written.
    /// - Throws: ``PostgresStoreError`` with code `unknownCampaign` or `invalidEventID`.
    public func apply(_ update: ProgressUpdate) async throws -> Bool {
        let eventID = try StreamEventID(parsing: update.lastEventID)
        let id = update.campaign
        return try await self.withTransaction("apply progress to campaign \(id)") { connection in
            let rows = try await connection.query(
                "SELECT app_id, last_event_ms, last_event_seq, queue_generation, fold_sequence FROM campaigns WHERE campaign_id = \(id) FOR UPDATE",
                logger: self.logger
            )
            var stored: (app: Int64, event: StreamEventID, generation: Int, fold: Int)? = nil
            for try await (app, ms, seq, generation, fold) in rows.decode((Int64, Int64, Int64, Int, Int).self) {
                stored = (app, StreamEventID(milliseconds: ms, sequence: seq), generation, fold)
            }
            guard let stored else { throw PostgresStoreError.unknownCampaign(id) }
            if let generation = update.generation, generation != stored.generation {
                throw PostgresStoreError.queueRebuilt(id, read: generation, stored: stored.generation)
            }
            let newer = eventID > stored.event
            if update.hasEvents && !newer { return false }
            let last = newer ? eventID : stored.event

            try await connection.query(
                """
                UPDATE campaigns SET
                    accepted = GREATEST(accepted, \(update.accepted)), resent = GREATEST(resent, \(update.resent)),
                    retried = GREATEST(retried, \(update.retried)),
                    done_shards = GREATEST(done_shards, \(update.doneShards)),
                    in_flight = CASE WHEN \(update.foldSequence ?? -1) > fold_sequence THEN COALESCE(\(update.inFlight), in_flight) ELSE in_flight END,
                    fold_sequence = GREATEST(fold_sequence, \(update.foldSequence ?? 0)),
                    last_event_id = \(last.description),
                    last_event_ms = \(last.milliseconds), last_event_seq = \(last.sequence), updated_at = now()
                WHERE campaign_id = \(id)
                """,
                logger: self.logger
            )
            if !update.cursors.isEmpty {
                let shards = update.cursors.keys.sorted()
                try await connection.query(
                    """
                    UPDATE campaign_shards s SET cursor = u.cursor, updated_at = now()
                    FROM unnest(\(shards), \(shards.map { update.cursors[$0]! })) AS u(shard, cursor)
                    WHERE s.campaign_id = \(id) AND s.shard = u.shard AND s.cursor < u.cursor
                    """,
                    logger: self.logger
                )
            }
            if let fold = update.foldSequence, fold > stored.fold, !update.sentMarks.isEmpty {
                let shards = update.sentMarks.keys.sorted()
                try await connection.query(
                    """
                    UPDATE campaign_shards s SET sent = u.sent, updated_at = now()
                    FROM unnest(\(shards), \(shards.map { update.sentMarks[$0]! })) AS u(shard, sent)
                    WHERE s.campaign_id = \(id) AND s.shard = u.shard
                    """,
                    logger: self.logger
                )
            }
            if !update.rejected.isEmpty {
                let reasons = update.rejected.keys.sorted()
                try await connection.query(
                    """
                    INSERT INTO campaign_rejections AS r (campaign_id, reason, count)
                    SELECT \(id), u.reason, u.count FROM unnest(\(reasons), \(reasons.map { update.rejected[$0]! })) AS u(reason, count)
                    ON CONFLICT (campaign_id, reason) DO UPDATE SET count = GREATEST(r.count, EXCLUDED.count)
                    """,
                    logger: self.logger
                )
            }
            if !update.rejections.isEmpty {
                try await self.recordRejections(update.rejections, campaign: id, app: stored.app, on: connection)
            }
            if !update.doneShardIDs.isEmpty {
                try await connection.query(
                    """
                    UPDATE campaign_shards SET state = 'done', updated_at = now()
                    WHERE campaign_id = \(id) AND shard = ANY(\(update.doneShardIDs))
                    """,
                    logger: self.logger
                )
            }
            return true
        }
    }

    private func recordRejections(_ rejections: [AppliedRejection], campaign id: UUID, app: Int64, on connection: PostgresConnection) async throws {
        let now = Date()
        // In the order they came: no index of the table is keyed by the token (schema 16).
        for chunk in Self.chunks(rejections) {
            // A missing APNs timestamp travels as -1 (bind arrays carry no NULLs) and is stored as NULL.
            try await connection.query(
                """
                INSERT INTO token_failures (campaign_id, token, reason, shard, apns_timestamp)
                SELECT \(id), u.token, u.reason, u.shard, NULLIF(u.timestamp, -1)
                FROM unnest(\(TokenArray(chunk.map(\.token))), \(chunk.map(\.reason.rawValue)), \(chunk.map(\.shard)),
                            \(chunk.map { $0.apnsTimestampMilliseconds ?? -1 })) AS u(token, reason, shard, timestamp)
                """,
                logger: self.logger
            )
        }
        let marks = rejections.compactMap { rejection -> TokenMark? in
            guard let status = TokenStatus(rejectionReason: rejection.reason) else { return nil }
            let since = rejection.apnsTimestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? now
            return TokenMark(token: rejection.token, status: status, reason: rejection.reason, since: since)
        }
        // Only the tokens the registry holds: a campaign's audience from a file is not registered
        // devices, and its verdicts are kept in `token_failures`.
        if !marks.isEmpty { try await self.mark(marks, app: app, addingUnknown: false, on: connection) }
    }
}
