import PostgresNIO

extension CampaignStore {
    /// The lock name the coordinator uses.
    public static let coordinatorLock = "pushfleet.coordinator"

    /// Runs `body` if this process wins the leadership lock `name`, and holds the lock until `body` ends.
    ///
    /// The lock is a session-level `pg_try_advisory_lock` on a dedicated connection: it never waits,
    /// and it dies with the connection, so a leader killed with `kill -9` frees it as soon as Postgres
    /// notices the closed socket. While `body` runs, the connection is watched (closed at once; mute
    /// for five ``PostgresConfiguration/leadershipCheckInterval``s); if it is lost, `body` is cancelled
    /// and this throws ``PostgresStoreError`` with code `leadershipLost` once `body` has returned
    /// (another process may lead by then). The server watches the other way: the session ends after
    /// twice as long without a ping (`idle_session_timeout`, Postgres 14 and later), so a leader that is
    /// frozen (stopped, paused, starved) or cut off from Postgres gives the lock up too, where its
    /// socket, still open, would hold it for as long as the freeze lasts. Each leadership takes the
    /// lock's next epoch, and the body's transactions are fenced by it (``LeadershipFence``): one
    /// begun after a later leadership began throws `leadershipLost` and writes nothing. The schema
    /// must be migrated (``migrate()``, version 18 and later).
    /// - Parameter name: which lock; processes contend only for the same name. Defaults to
    ///   ``coordinatorLock``.
    /// - Returns: `body`'s result, or `nil` at once if another session holds the lock.
    public func withLeadership<T: Sendable>(
        named name: String = CampaignStore.coordinatorLock, _ body: @Sendable () async throws -> T
    ) async throws -> T? {
        let key = Self.lockKey(name)
        let operation = "take the leadership lock \(name)"
        // Connecting, locking and beginning the epoch may be given up on (see `abandoning`); the
        // leader's body may not, since it must not outlive this call, so it runs outside.
        let locked: (connection: PostgresConnection, fence: LeadershipFence)?
        do {
            locked = try await self.abandoning(operation, discard: { locked in try? await locked?.connection.close() }) { watched in
                try await self.withNewConnection(operation, watched) { connection -> (connection: PostgresConnection, fence: LeadershipFence)? in
                    await self.endWhenMute(connection)
                    let rows = try await connection.query("SELECT pg_try_advisory_lock(\(key))", logger: self.logger)
                    var acquired = false
                    for try await granted in rows.decode(Bool.self) { acquired = granted }
                    guard acquired else {
                        try? await connection.close()
                        return nil
                    }
                    do {
                        return (connection, try await self.beginEpoch(of: name, on: connection))
                    } catch {
                        try? await connection.close()  // which frees the lock
                        throw error
                    }
                }
            }
        } catch {
            throw self.storeError(error, operation)
        }
        guard let (connection, fence) = locked else { return nil }
        do {
            let result = try await LeadershipFence.$current.withValue(fence) { try await self.lead(on: connection, body) }
            await self.unlock(key, on: connection)
            try? await connection.close()
            return result
        } catch let error as PostgresStoreError where error.code == .leadershipLost {
            try? await connection.close()  // the connection is gone or mute: closing it is all that is left
            throw error
        } catch {
            await self.unlock(key, on: connection)
            try? await connection.close()
            throw self.storeError(error, operation)
        }
    }

    /// Asks the server to end the session of `connection` once it has been idle for twice as long
    /// as the watch lets a ping go unanswered (20 s at the defaults): by then the leader has given
    /// the lock up itself if it could still run. An older server without the setting keeps the
    /// session; the leader then holds the lock only while its socket lives, as before.
    private func endWhenMute(_ connection: PostgresConnection) async {
        let milliseconds = PostgresConfiguration.milliseconds(self.configuration.leadershipCheckInterval * (2 * LeadershipWatch.muteIntervals))
        do {
            // A number this process computed: SET takes no bind parameters.
            try await connection.query(PostgresQuery(unsafeSQL: "SET idle_session_timeout = \(milliseconds)"), logger: self.logger)
        } catch {
            self.logger.debug("the leadership session has no idle timeout", metadata: ["error": "\(String(reflecting: error))"])
        }
    }

    /// Releases the lock before the connection closes (the server drops a closed session's locks a
    /// moment later, and the next contender should not lose that race). Waits at most three check
    /// intervals: a query on a half-dead connection may never be answered, and postgres-nio never
    /// answers one written after the connection closed. Closing the connection ends it either way.
    private func unlock(_ key: Int64, on connection: PostgresConnection) async {
        guard !connection.isClosed else { return }
        let (done, finished) = AsyncStream<Void>.makeStream()
        let logger = self.logger
        Task {
            _ = try? await connection.query("SELECT pg_advisory_unlock(\(key))", logger: logger)
            finished.finish()
        }
        let timeout = Task {
            try? await Task.sleep(for: self.configuration.leadershipCheckInterval * 3)
            finished.finish()
        }
        for await _ in done {}
        timeout.cancel()
    }

    private enum Round<T: Sendable>: Sendable {
        case finished(T)
        case lost(String)
    }

    private func lead<T: Sendable>(on connection: PostgresConnection, _ body: @Sendable () async throws -> T) async throws -> T {
        let watch = LeadershipWatch(connection: connection, interval: self.configuration.leadershipCheckInterval, logger: self.logger)
        defer { watch.stop() }
        // The task group awaits both children before it returns, so `body` does not outlive this call.
        return try await withoutActuallyEscaping(body) { body in
            try await withThrowingTaskGroup(of: Round<T>.self) { group in
                group.addTask { .finished(try await body()) }
                group.addTask {
                    for await reason in watch.lost { return .lost(reason) }
                    throw CancellationError()
                }
                let first = try await group.next()!
                group.cancelAll()
                switch first {
                case .finished(let value): return value
                case .lost(let reason): throw PostgresStoreError.leadershipLost(self.configuration.endpoint, reason)
                }
            }
        }
    }

    /// A stable 64-bit key for a lock name (FNV-1a), the same in every process and release.
    static func lockKey(_ name: String) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return Int64(bitPattern: hash)
    }
}
