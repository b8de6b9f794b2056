public import Foundation
import PostgresNIO
public import PushFleetCore

extension CampaignStore {
    /// Writes a new campaign (state `pending`) and one `campaign_shards` row per entry of
    /// `shardTokenCounts`, in one statement; with `tokens`, also the durable copy of its shards
    /// (as ``storeShardTokens(campaign:launch:shards:)`` writes it) and the launch they belong to
    /// (as ``recordLaunch(_:launch:)`` records it), in the same statement.
    ///
    /// A notification's launch waits on every round trip, so this is one round trip whenever the
    /// app is known (two the first time a topic and environment are seen).
    /// - Returns: `false`, changing nothing, if a campaign with this id exists already (a re-run launch).
    /// - Throws: ``PostgresStoreError`` with code `invalidInput` when the shard counts do not add up to
    ///   `totalTokens`, or a count, the shard size or the environment is out of range.
    public func createCampaign(
        _ campaign: NewCampaign, tokens: (launch: String, shards: [(shard: Int, tokens: [DeviceToken])])? = nil
    ) async throws -> Bool {
        guard campaign.shardTokenCounts.allSatisfy({ $0 >= 0 }), campaign.shardSize > 0 else {
            throw PostgresStoreError.invalidInput("campaign \(campaign.id): shard sizes must be positive and token counts not negative")
        }
        let sum = campaign.shardTokenCounts.reduce(0, +)
        guard sum == campaign.totalTokens else {
            throw PostgresStoreError.invalidInput(
                "campaign \(campaign.id): its \(campaign.shardTokenCounts.count) shards hold \(sum) tokens, but the total is \(campaign.totalTokens)"
            )
        }
        try Self.checkTopic(campaign.definition.topic)
        let (shardIDs, packed) = (tokens?.shards.map(\.shard) ?? [], PackedShards(tokens?.shards.map(\.tokens) ?? []))
        return try await self.withConnection("create campaign \(campaign.id)") { connection in
            let (c, d) = (campaign, campaign.definition)
            // The app is read in the statement; only an app never seen before costs a round trip more.
            for attempt in 0..<2 {
                let rows = try await connection.query(
                    """
                    WITH app AS (
                        SELECT app_id FROM apps WHERE topic = \(d.topic) AND environment = \(d.environment.rawValue)
                    ), created AS (
                        INSERT INTO campaigns (campaign_id, app_id, payload, push_type, priority, expiration, collapse_id,
                                               shard_size, shard_count, total_tokens, duplicates_dropped, kind, audience, launch,
                                               rate_limit, starts_at, parent_id, variant, personalized)
                        SELECT \(c.id), app.app_id, \(ByteBuffer(bytes: d.payload)), \(d.pushType), \(d.priority), \(d.expiration),
                               \(d.collapseID), \(c.shardSize), \(c.shardTokenCounts.count), \(c.totalTokens), \(c.duplicatesDropped),
                               \(d.kind.rawValue), \(c.audience), \(tokens?.launch), \(d.rateLimit), \(c.startsAt),
                               \(c.split?.id), \(c.split?.variant), \(d.personalized)
                        FROM app
                        ON CONFLICT (campaign_id) DO NOTHING
                        RETURNING campaign_id
                    ), shards AS (
                        INSERT INTO campaign_shards (campaign_id, shard, token_count)
                        SELECT created.campaign_id, s.ordinality - 1, s.count
                        FROM created, unnest(\(c.shardTokenCounts)) WITH ORDINALITY AS s(count, ordinality)
                    ), stored AS (
                        INSERT INTO campaign_shard_tokens (campaign_id, launch, shard, tokens)
                        SELECT created.campaign_id, \(tokens?.launch), u.shard, u.tokens
                        FROM created, unnest(\(shardIDs), \(packed)) AS u(shard, tokens)
                        ON CONFLICT (campaign_id, launch, shard) DO UPDATE SET tokens = EXCLUDED.tokens
                    )
                    SELECT (SELECT count(*) FROM app), (SELECT count(*) FROM created)
                    """,
                    logger: self.logger
                )
                var (apps, created): (Int64, Int64) = (0, 0)
                for try await row in rows.decode((Int64, Int64).self) { (apps, created) = row }
                if apps == 1 || attempt == 1 { return created == 1 }
                _ = try await self.appID(topic: d.topic, environment: d.environment, on: connection)
            }
            return false
        }
    }

    /// The campaign with this id, or `nil`.
    public func campaign(_ id: UUID) async throws -> CampaignRecord? {
        try await self.withConnection("read campaign \(id)") { connection in
            let rows = try await connection.query("\(unescaped: Self.selectCampaigns) WHERE c.campaign_id = \(id)", logger: self.logger)
            for try await row in rows { return try Self.record(row) }
            return nil
        }
    }

    /// The variants of a split test (`launch --variant`), by name; empty when `split` names none.
    public func variants(of split: UUID) async throws -> [CampaignRecord] {
        try await self.withConnection("read the variants of split test \(split)") { connection in
            let rows = try await connection.query(
                "\(unescaped: Self.selectCampaigns) WHERE c.parent_id = \(split) ORDER BY c.variant", logger: self.logger
            )
            var records: [CampaignRecord] = []
            for try await row in rows { records.append(try Self.record(row)) }
            return records
        }
    }

    /// The campaigns in any of `states`, oldest first.
    public func campaigns(in states: [CampaignState]) async throws -> [CampaignRecord] {
        try await self.campaigns(in: states, order: "c.created_at, c.campaign_id", limit: nil)
    }

    /// Up to `limit` campaigns in any of `states`, newest first; of kind campaign only unless
    /// `kinds` says otherwise (a doorbell's rings would bury them).
    public func recentCampaigns(in states: [CampaignState], limit: Int, kinds: [CampaignKind] = [.campaign]) async throws -> [CampaignRecord] {
        try await self.campaigns(in: states, order: "c.created_at DESC, c.campaign_id", limit: limit, kinds: kinds)
    }

    private func campaigns(
        in states: [CampaignState], order: String, limit: Int?, kinds: [CampaignKind] = CampaignKind.allCases
    ) async throws -> [CampaignRecord] {
        try await self.withConnection("list campaigns") { connection in
            let rows = try await connection.query(
                """
                \(unescaped: Self.selectCampaigns) WHERE c.state = ANY(\(states.map(\.rawValue))) AND c.kind = ANY(\(kinds.map(\.rawValue)))
                ORDER BY \(unescaped: order) LIMIT \(limit.map(Int64.init) ?? Int64.max)
                """,
                logger: self.logger
            )
            var records: [CampaignRecord] = []
            for try await row in rows { records.append(try Self.record(row)) }
            return records
        }
    }

    /// Moves a campaign to `state` if it is in one of `allowed` (an empty list allows none), with
    /// `reason` (why PushFleet itself paused or failed it; nil clears it).
    /// Entering `running` sets `started_at` the first time; entering `completed`, `cancelled` or `failed`
    /// sets `finished_at`.
    /// - Returns: whether the campaign was in an allowed state (and so now is in `state`); `false` also
    ///   for an unknown id.
    public func setState(_ id: UUID, to state: CampaignState, from allowed: [CampaignState], reason: String? = nil) async throws -> Bool {
        try await self.withWrite("set campaign \(id) to \(state)") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET
                    state = \(state.rawValue),
                    state_reason = \(reason),
                    auto_resume_at = NULL,
                    started_at = CASE WHEN \(state == .running) THEN COALESCE(started_at, now()) ELSE started_at END,
                    finished_at = CASE WHEN \(state.isFinal) THEN COALESCE(finished_at, now()) ELSE finished_at END,
                    updated_at = now()
                WHERE campaign_id = \(id) AND state = ANY(\(allowed.map(\.rawValue)))
                RETURNING 1
                """,
                logger: self.logger
            )
            var changed = false
            for try await _ in rows { changed = true }
            return changed
        }
    }

    /// Sets how many notifications a second the fleet sends of a campaign that has not ended;
    /// nil lifts the limit.
    /// - Returns: whether such a campaign exists (and now has that limit).
    /// - Throws: ``PostgresStoreError`` with code `invalidInput` for a limit below 1.
    public func setRateLimit(_ id: UUID, to rate: Int?) async throws -> Bool {
        if let rate, !(1...Int(Int32.max)).contains(rate) {
            throw PostgresStoreError.invalidInput("a rate limit is 1 to \(Int32.max) notifications a second, not \(rate)")
        }
        let unfinished = CampaignState.allCases.filter { !$0.isFinal }.map(\.rawValue)
        return try await self.withConnection("set the rate limit of campaign \(id)") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET rate_limit = \(rate), updated_at = now()
                WHERE campaign_id = \(id) AND state = ANY(\(unfinished)) RETURNING 1
                """,
                logger: self.logger
            )
            var changed = false
            for try await _ in rows { changed = true }
            return changed
        }
    }

    /// Pauses a running campaign because APNs itself failed (5xx, 429 past the retries), to be
    /// resumed by the coordinator after `delay` doubled for every earlier such pause of the
    /// campaign, at most `maximum`. An operator's pause, resume or cancel clears the timer.
    /// - Returns: when it resumes, or nil if the campaign was not running.
    public func pauseForOutage(_ id: UUID, reason: String, delay: Duration, maximum: Duration) async throws -> Date? {
        let (base, cap) = (delay / .seconds(1), maximum / .seconds(1))
        return try await self.withWrite("pause campaign \(id) for an APNs outage") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET
                    state = 'paused',
                    state_reason = \(reason),
                    auto_resume_at = now() + make_interval(secs => LEAST(\(base) * power(2, LEAST(outage_pauses, 30)), \(cap))),
                    outage_pauses = outage_pauses + 1,
                    updated_at = now()
                WHERE campaign_id = \(id) AND state = 'running'
                RETURNING auto_resume_at
                """,
                logger: self.logger
            )
            for try await row in rows { return try row.decode(Date.self) }
            return nil
        }
    }

    /// Resumes a campaign paused for an APNs outage whose time has come.
    /// - Returns: whether it was resumed now.
    public func resumeAfterOutage(_ id: UUID) async throws -> Bool {
        try await self.withWrite("resume campaign \(id) after an APNs outage") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET state = 'running', state_reason = NULL, auto_resume_at = NULL, updated_at = now()
                WHERE campaign_id = \(id) AND state = 'paused' AND auto_resume_at <= now()
                RETURNING 1
                """,
                logger: self.logger
            )
            var resumed = false
            for try await _ in rows { resumed = true }
            return resumed
        }
    }

    /// Records how many tokens the operator's cancel left unsent. Monotonic: a lower count than the
    /// stored one changes nothing.
    /// - Throws: ``PostgresStoreError`` with code `unknownCampaign` for an unknown id.
    public func setCancelled(_ id: UUID, count: Int) async throws {
        try await self.withWrite("record cancelled tokens of \(id)") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET cancelled = GREATEST(cancelled, \(count)), updated_at = now()
                WHERE campaign_id = \(id) RETURNING 1
                """,
                logger: self.logger
            )
            var found = false
            for try await _ in rows { found = true }
            guard found else { throw PostgresStoreError.unknownCampaign(id) }
        }
    }

    /// Finished campaigns (completed, or cancelled and settled) whose Redis keys may still be there,
    /// oldest first.
    public func campaignsAwaitingCleanup() async throws -> [CampaignRecord] {
        try await self.withConnection("list campaigns awaiting cleanup") { connection in
            let rows = try await connection.query(
                """
                \(unescaped: Self.selectCampaigns)
                WHERE NOT c.queue_removed AND c.state IN ('completed', 'cancelled') ORDER BY c.created_at, c.campaign_id
                """,
                logger: self.logger
            )
            var records: [CampaignRecord] = []
            for try await row in rows {
                let record = try Self.record(row)
                if record.state == .completed || record.pending == 0 { records.append(record) }
            }
            return records
        }
    }

    /// Records that a finished campaign's Redis keys were removed, and deletes its stored tokens
    /// (a notification's are kept: its per-device outcomes are read from them).
    public func markQueueRemoved(_ id: UUID) async throws {
        try await self.withTransaction("record the cleanup of campaign \(id)") { connection in
            _ = try await connection.query("UPDATE campaigns SET queue_removed = true WHERE campaign_id = \(id)", logger: self.logger)
            _ = try await connection.query(
                """
                DELETE FROM campaign_shard_tokens
                WHERE campaign_id = \(id) AND NOT EXISTS (SELECT 1 FROM campaigns WHERE campaign_id = \(id) AND kind = 'notification')
                """,
                logger: self.logger
            )
        }
    }

    /// Deletes up to `limit` batches of token failures (a fold's rejections, up to 10,000 each)
    /// observed before `cutoff`, oldest first.
    /// - Returns: how many batches were deleted; fewer than `limit` means none older is left.
    public func pruneTokenFailures(observedBefore cutoff: Date, limit: Int = 10) async throws -> Int {
        try await self.withConnection("prune token failures") { connection in
            let rows = try await connection.query(
                """
                DELETE FROM token_failure_batches WHERE batch = ANY(ARRAY(
                    SELECT batch FROM token_failure_batches WHERE observed_at < \(cutoff) ORDER BY observed_at LIMIT \(limit)
                )) RETURNING 1
                """,
                logger: self.logger
            )
            var deleted = 0
            for try await _ in rows { deleted += 1 }
            return deleted
        }
    }

    /// Records the campaign's dead shards, and fails it with `reason` when `fail` (from running or
    /// paused). - Returns: whether it was failed now.
    @discardableResult
    public func setDeadShards(_ id: UUID, _ shards: [Int], failWith reason: String?) async throws -> Bool {
        try await self.withWrite("record the dead shards of \(id)") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET
                    dead_shards = \(shards),
                    state = CASE WHEN \(reason != nil) AND state IN ('running', 'paused') THEN 'failed' ELSE state END,
                    state_reason = CASE WHEN \(reason != nil) AND state IN ('running', 'paused') THEN \(reason) ELSE state_reason END,
                    finished_at = CASE WHEN \(reason != nil) AND state IN ('running', 'paused') THEN now() ELSE finished_at END,
                    updated_at = now()
                WHERE campaign_id = \(id)
                RETURNING state
                """,
                logger: self.logger
            )
            var failed = false
            for try await state in rows.decode(String.self) { failed = reason != nil && state == "failed" }
            return failed
        }
    }

    /// Puts a failed campaign back to running for `campaign retry`, clearing its reason, dead
    /// shards and finish time. - Returns: whether it was failed, running or paused (and so is now
    /// running, or stays paused).
    public func retry(_ id: UUID) async throws -> Bool {
        try await self.withConnection("retry campaign \(id)") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET
                    state = CASE WHEN state = 'failed' THEN 'running' ELSE state END,
                    state_reason = NULL, dead_shards = '{}', finished_at = NULL, updated_at = now()
                WHERE campaign_id = \(id) AND state IN ('failed', 'running', 'paused')
                RETURNING 1
                """,
                logger: self.logger
            )
            var found = false
            for try await _ in rows { found = true }
            return found
        }
    }
}

extension CampaignStore {
    /// How many campaigns each state holds (states with none are absent).
    public func campaignCountsByState() async throws -> [CampaignState: Int] {
        try await self.withConnection("count campaigns by state") { connection in
            let rows = try await connection.query("SELECT state, count(*)::bigint FROM campaigns GROUP BY state", logger: self.logger)
            var counts: [CampaignState: Int] = [:]
            for try await (state, count) in rows.decode((String, Int64).self) {
                if let state = CampaignState(rawValue: state) { counts[state] = Int(count) }
            }
            return counts
        }
    }

    /// Returns once Postgres has answered a query; throws what stopped it.
    public func ping() async throws {
        try await self.withConnection("ping") { connection in
            _ = try await connection.query("SELECT 1", logger: self.logger)
        }
    }
}

