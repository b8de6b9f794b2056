public import Foundation
import PostgresNIO

/// What Postgres kept of a campaign's Redis queue at the last fold: enough to rebuild it.
public struct QueueRecoveryPoint: Sendable, Hashable {
    /// The launch whose stored shards are the campaign's audience; nil when none was recorded
    /// (a campaign launched before audiences were stored).
    public var launch: String?
    /// Each shard's cursor as last folded; the index is the shard id.
    public var cursors: [Int]
    /// Each shard's `sent` mark in the fold that wrote its cursor (0 when none was folded); the index is the shard id.
    public var sentMarks: [Int]
    /// Each shard's length; the index is the shard id.
    public var tokenCounts: [Int]
    /// Tokens handed to senders past their cursors at the last fold.
    public var inFlight: Int
    /// The number of the last snapshot folded.
    public var foldSequence: Int
    /// How many times the queue was rebuilt, this time included.
    public var generation: Int
}

extension CampaignStore {
    /// The campaign's last folded cursors and launch, or nil when the campaign is unknown.
    public func recoveryPoint(_ id: UUID) async throws -> QueueRecoveryPoint? {
        try await self.withConnection("read the recovery point of campaign \(id)") { connection in
            let rows = try await connection.query(
                """
                SELECT c.launch, c.in_flight, c.fold_sequence, c.queue_generation,
                       ARRAY(SELECT s.cursor FROM campaign_shards s WHERE s.campaign_id = c.campaign_id ORDER BY s.shard),
                       ARRAY(SELECT s.sent FROM campaign_shards s WHERE s.campaign_id = c.campaign_id ORDER BY s.shard),
                       ARRAY(SELECT s.token_count FROM campaign_shards s WHERE s.campaign_id = c.campaign_id ORDER BY s.shard)
                FROM campaigns c WHERE c.campaign_id = \(id)
                """,
                logger: self.logger
            )
            for try await (launch, inFlight, fold, generation, cursors, sent, counts) in rows.decode(
                (String?, Int, Int, Int, [Int], [Int], [Int]).self
            ) {
                return QueueRecoveryPoint(
                    launch: launch, cursors: cursors, sentMarks: sent, tokenCounts: counts, inFlight: inFlight, foldSequence: fold, generation: generation
                )
            }
            return nil
        }
    }

    /// Starts rebuilding a running or paused campaign's lost queue: the tokens that were in flight
    /// at the last fold count as re-sent (they may have been sent, and will be again), the stream
    /// position starts over (the rebuilt queue has a new event stream), and shards whose folded
    /// cursor reached their length are marked done. The queue generation is raised, so a fold of
    /// the lost queue still under way is refused: read the recovery point after this.
    /// - Parameter generation: The generation the caller saw lost; when another coordinator has
    ///   rebuilt the queue since, nothing changes.
    /// - Returns: false when the campaign is not running or paused, or not at `generation` (nothing changed).
    public func beginQueueRebuild(_ id: UUID, generation: Int) async throws -> Bool {
        try await self.withTransaction("begin rebuilding the queue of campaign \(id)") { connection in
            let rows = try await connection.query(
                """
                UPDATE campaigns SET resent = resent + in_flight, in_flight = 0, last_event_id = '0-0', last_event_ms = 0,
                    last_event_seq = 0, queue_generation = queue_generation + 1, updated_at = now()
                WHERE campaign_id = \(id) AND state IN ('running', 'paused') AND queue_generation = \(generation)
                RETURNING 1
                """,
                logger: self.logger
            )
            var changed = false
            for try await _ in rows { changed = true }
            guard changed else { return false }
            try await connection.query(
                """
                UPDATE campaign_shards SET state = 'done', updated_at = now()
                WHERE campaign_id = \(id) AND state <> 'done' AND cursor >= token_count
                """,
                logger: self.logger
            )
            return true
        }
    }
}
