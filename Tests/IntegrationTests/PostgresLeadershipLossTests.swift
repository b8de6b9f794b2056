import Foundation
@testable import PushFleetPostgres
import Testing

/// A leader whose lock connection dies learns it: its body is cancelled and `withLeadership` throws.
@Suite struct PostgresLeadershipLossTests {
    @Test func terminatedLockConnectionCancelsTheLeader() async throws {
        let name = "pushfleet.test.\(UUID())"
        var configuration = try PostgresFixture.configuration()
        // A killed connection is noticed at once whatever the interval; a long one keeps a machine
        // busy with other suites from declaring the lock connection mute (5 intervals) first.
        configuration.leadershipCheckInterval = .seconds(2)
        let leader = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        try await leader.migrate()  // the leadership epochs
        let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
        let leading = Task {
            try await leader.withLeadership(named: name) {
                enteredContinuation.yield()
                while !Task.isCancelled { try? await Task.sleep(for: .milliseconds(20)) }
                return "cancelled"
            }
        }
        for await _ in entered { break }

        try await PostgresFixture.withStore { store async throws in
            // What a Postgres restart or failover does to the leader's session.
            #expect(try await store.terminateLeader(named: name))
        }
        let error = await #expect(throws: PostgresStoreError.self) { try await leading.value }
        #expect(error?.code == .leadershipLost)
        #expect(error?.message.contains(configuration.endpoint) == true)

        // The lock is free again.
        let next = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        #expect(try await next.withLeadership(named: name) { 1 } == 1)
    }
}
