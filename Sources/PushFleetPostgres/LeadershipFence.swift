import PostgresNIO

/// One leadership of a lock: its number among the lock's leaderships (`leadership_epochs`).
///
/// A leader frozen past its session's idle timeout (SIGSTOP, a VM paused, a long GC-like stall)
/// loses the lock to a standby, and when it continues it may still be in the middle of a round: what
/// it read before the freeze it would write after it, beside the new leader. So each leadership
/// takes the next epoch of its lock, and while ``CampaignStore/withLeadership(named:_:)`` runs its
/// body, every transaction of that body begins by locking the lock's epoch row `FOR SHARE` and
/// checking the epoch is still its own (``CampaignStore/withTransaction(_:_:)``). The next leader
/// raises the epoch with an `UPDATE` of that row, which waits for the transactions that hold it: a
/// write of the old leader either commits before the new one leads or fails with
/// ``PostgresStoreError/Code-swift.struct/leadershipLost``, never after. A transaction the old leader
/// left open while frozen holds the new one up until Postgres ends it
/// (`idle_in_transaction_session_timeout`, 30 s), and is then rolled back.
///
/// Only the body's own tasks carry the fence (a task-local value): other users of the same store
/// (the API server of `pushfleet demo`, the operator's commands) write as before.
public struct LeadershipFence: Sendable, Hashable {
    /// The lock's name (``CampaignStore/coordinatorLock``).
    public var lock: String
    /// This leadership's number: one above the previous leadership of the lock.
    public var epoch: Int64

    /// The fence of the leadership the current task works for, if any.
    @TaskLocal static var current: LeadershipFence?
}

extension CampaignStore {
    /// Takes the next epoch of `lock` on the leadership connection; waits for every transaction
    /// that holds the current epoch's row, at most twice the time after which Postgres ends an idle
    /// one (`lock_timeout`): a transaction of the last leader that is busy rather than idle (waiting
    /// on a lock an operator's session holds) must not keep every coordinator from leading. Then
    /// this fails, the lock is let go, and the coordinator contends again.
    func beginEpoch(of lock: String, on connection: PostgresConnection) async throws -> LeadershipFence {
        let wait = PostgresConfiguration.milliseconds(self.configuration.idleInTransactionTimeout * 2)
        // A number this process computed: SET takes no bind parameters.
        try await connection.query(PostgresQuery(unsafeSQL: "SET lock_timeout = \(wait)"), logger: self.logger)
        let rows = try await connection.query(
            """
            INSERT INTO leadership_epochs (lock_name, epoch) VALUES (\(lock), 1)
            ON CONFLICT (lock_name) DO UPDATE SET epoch = leadership_epochs.epoch + 1
            RETURNING epoch
            """,
            logger: self.logger
        )
        for try await epoch in rows.decode(Int64.self) { return LeadershipFence(lock: lock, epoch: epoch) }
        throw PostgresStoreError.queryFailed(self.configuration.endpoint, "begin a leadership of \(lock)", "no epoch returned")
    }

    /// Inside a transaction: holds the epoch row of `fence`'s lock until the transaction ends, and
    /// throws `leadershipLost` if a later leadership has begun. `FOR SHARE`, not `FOR KEY SHARE`:
    /// the next leader's `ON CONFLICT DO UPDATE` of a non-key column must wait for it.
    func check(_ fence: LeadershipFence, on connection: PostgresConnection) async throws {
        let rows = try await connection.query(
            "SELECT epoch FROM leadership_epochs WHERE lock_name = \(fence.lock) FOR SHARE", logger: self.logger
        )
        var latest: Int64? = nil
        for try await epoch in rows.decode(Int64.self) { latest = epoch }
        guard latest == fence.epoch else {
            throw PostgresStoreError.leadershipLost(
                self.configuration.endpoint,
                "another leadership of \(fence.lock) has begun (epoch \(latest.map(String.init) ?? "none"); this one's is \(fence.epoch))"
            )
        }
    }
}
