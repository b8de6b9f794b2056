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
    /// Applying events appends the rejections to `token_failure_batches` (one row per 10,000, read
    /// one per rejection through the `token_failures` view), and marks the rejected
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
        // In the order they came, up to 10,000 a row of parallel arrays (schema 17). A missing APNs
        // timestamp is stored as -1 (bind arrays carry no NULLs); the `token_failures` view reads it as NULL.
        for chunk in Self.chunks(rejections) {
            try await connection.query(
                """
                INSERT INTO token_failure_batches (campaign_id, tokens, reasons, shards, apns_timestamps)
                VALUES (\(id), \(TokenArray(chunk.map(\.token))), \(chunk.map(\.reason.rawValue)), \(chunk.map(\.shard)),
                        \(chunk.map { $0.apnsTimestampMilliseconds ?? -1 }))
                """,
                logger: self.logger
            )
        }
        // Only the tokens the registry holds: a campaign's audience from a file is not registered
        // devices, and its verdicts are kept in `token_failure_batches`. An app whose registry is empty
        // (its campaigns all come from files) is asked once, not once per rejection.
        guard rejections.contains(where: { TokenStatus(rejectionReason: $0.reason) != nil }),
            try await self.holdsDevices(app: app, on: connection)
        else { return }
        let marks = rejections.compactMap { rejection -> TokenMark? in
            guard let status = TokenStatus(rejectionReason: rejection.reason) else { return nil }
            let since = rejection.apnsTimestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) } ?? now
            return TokenMark(token: rejection.token, status: status, reason: rejection.reason, since: since)
        }
        try await self.mark(marks, app: app, addingUnknown: false, on: connection)
    }

    /// Whether the registry holds any device of `app`: one probe of its primary key.
    private func holdsDevices(app: Int64, on connection: PostgresConnection) async throws -> Bool {
        let rows = try await connection.query("SELECT EXISTS (SELECT 1 FROM device_tokens WHERE app_id = \(app))", logger: self.logger)
        for try await held in rows.decode(Bool.self) { return held }
        return false
    }
}
