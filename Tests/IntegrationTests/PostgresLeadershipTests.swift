import Foundation
import PushFleetPostgres
import Testing

/// `CampaignStore.withLeadership`: one leader per lock name, and the lock passes on when it ends.
@Suite struct PostgresLeadershipTests {
    @Test func secondContenderWaitsOutTheFirst() async throws {
        let name = "pushfleet.test.\(UUID())"
        let configuration = try PostgresFixture.configuration()
        let first = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        let second = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        let (entered, enteredContinuation) = AsyncStream<Void>.makeStream()
        let (release, releaseContinuation) = AsyncStream<Void>.makeStream()

        let leader = Task {
            try await first.withLeadership(named: name) {
                enteredContinuation.yield()
                for await _ in release { break }
                return 42
            }
        }
        for await _ in entered { break }
        #expect(try await second.withLeadership(named: name) { 1 } == nil)
        #expect(try await first.withLeadership(named: name) { 1 } == nil)  // another connection of the same process
        #expect(try await second.withLeadership(named: name + ".other") { 7 } == 7)

        releaseContinuation.yield()
        #expect(try await leader.value == 42)
        #expect(try await second.withLeadership(named: name) { 2 } == 2)
    }

    @Test func aFailingBodyReleasesTheLock() async throws {
        struct Failure: Error {}
        let name = "pushfleet.test.\(UUID())"
        let store = CampaignStore(configuration: try PostgresFixture.configuration(), logger: PostgresFixture.logger)
        await #expect(throws: Failure.self) { _ = try await store.withLeadership(named: name) { () throws -> Int in throw Failure() } }
        #expect(try await store.withLeadership(named: name) { 3 } == 3)
    }
}
