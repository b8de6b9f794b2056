import Foundation
@testable import PushFleetPostgres
import Testing

/// The server-side bounds that let a standby coordinator take over from a frozen leader
/// (``PipelineTests/theStandbyCoordinatorTakesOverFromAFrozenLeader(_:)`` is the end-to-end test):
/// a transaction left idle past ``PostgresConfiguration/idleInTransactionTimeout`` ends its
/// session, and a leader that keeps pinging keeps its lock past the leadership session's idle
/// timeout.
@Suite struct PostgresSessionTimeoutTests {
    @Test func aTransactionLeftIdleEndsItsSession() async throws {
        var configuration = try PostgresFixture.configuration()
        configuration.idleInTransactionTimeout = .seconds(2)
        let store = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        let running = Task { await store.run() }
        defer { running.cancel() }

        // A transaction that waits on nothing but Postgres is untouched (the bound is generous: the
        // suites share two cores).
        try await store.transaction(pausingFor: .zero)
        // One whose process stops between two statements is ended by the server, and its locks with it.
        await #expect(throws: (any Error).self) { try await store.transaction(pausingFor: .seconds(8)) }
        // The pool goes on with new sessions.
        try await store.transaction(pausingFor: .zero)
    }

    /// The leadership session ends after ten check intervals without a ping; a leader whose pings
    /// go on holds its lock past that. (The interval is long enough for a loaded machine: the
    /// leader itself gives up after five intervals without an answer.)
    @Test func aLeaderThatPingsKeepsItsLockPastTheIdleTimeout() async throws {
        var configuration = try PostgresFixture.configuration()
        configuration.leadershipCheckInterval = .seconds(1)
        let store = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        let other = CampaignStore(configuration: try PostgresFixture.configuration(), logger: PostgresFixture.logger)
        try await store.migrate()  // the leadership epochs
        let name = "pushfleet.test.\(UUID())"
        let held = try await store.withLeadership(named: name) { () async throws -> Bool in
            try await Task.sleep(for: .seconds(15))  // past the session's idle timeout of 10 s
            return try await other.withLeadership(named: name) { true } == nil
        }
        #expect(held == true, "the lock held throughout, and the other contender was refused")
    }
}
