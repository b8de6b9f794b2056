import Foundation
import PostgresNIO
@testable import PushFleetPostgres
import PushFleetTestSupport
import Testing

/// `CampaignStore.withLeadership`: one leader per lock name, and the lock passes on when it ends.
@Suite struct PostgresLeadershipTests {
    @Test func secondContenderWaitsOutTheFirst() async throws {
        let name = "pushfleet.test.\(UUID())"
        let configuration = try PostgresFixture.configuration()
        let first = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        let second = CampaignStore(configuration: configuration, logger: PostgresFixture.logger)
        try await first.migrate()  // the leadership epochs
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
        try await store.migrate()
        await #expect(throws: Failure.self) { _ = try await store.withLeadership(named: name) { () throws -> Int in throw Failure() } }
        #expect(try await store.withLeadership(named: name) { 3 } == 3)
    }

    /// A leader frozen past its lock and then continued finishes the step it was in: what it writes
    /// then is refused, because a later leadership has begun (``LeadershipFence``). The straggler
    /// here is a task the first leadership started, which carries its fence as a frozen round
    /// would; it writes only once the second leader leads and has written itself.
    @Test func aWriteOfAnEarlierLeadershipIsRefused() async throws {
        try await PostgresFixture.withStore { store in
            let name = "pushfleet.test.\(UUID())"
            let campaign = try await Self.runningCampaign(in: store)

            let (go, goContinuation) = AsyncStream<Void>.makeStream()
            let straggler = try await store.withLeadership(named: name) {
                // Its own writes go through while it leads.
                let paused = try await store.setState(campaign.id, to: .paused, from: [.running], reason: "first leader")
                #expect(paused)
                return Task {
                    for await _ in go { break }
                    return try await store.setState(campaign.id, to: .failed, from: [.running, .paused], reason: "stale")
                }
            }
            let straggling = try #require(straggler)

            let led: Bool? = try await PostgresFixture.withStore { second in
                try await second.withLeadership(named: name) {
                    let resumed = try await second.setState(campaign.id, to: .running, from: [.paused])
                    #expect(resumed, "the second leader's write")
                    goContinuation.yield()
                    await #expect(throws: PostgresStoreError.self, "the first leadership's write, after the second began") {
                        _ = try await straggling.value
                    }
                    return true
                }
            }
            #expect(led == true)
            let record = try #require(try await store.campaign(campaign.id))
            #expect(record.state == .running, "the second leader's state stands")
            #expect(record.stateReason == nil)

            // Outside any leadership (an operator's command), writes are not fenced.
            #expect(try await store.setState(campaign.id, to: .paused, from: [.running]))
        }
    }

    /// A transaction of the first leadership still open when the second takes the lock holds the
    /// second up until it ends, and commits: the second leader then reads what it wrote.
    @Test func aLeadershipBeginsOnlyOnceTheTransactionsOfTheLastHaveEnded() async throws {
        try await PostgresFixture.withStore { store in
            let name = "pushfleet.test.\(UUID())"
            let campaign = try await Self.runningCampaign(in: store)

            let (inside, insideContinuation) = AsyncStream<Void>.makeStream()
            let (finish, finishContinuation) = AsyncStream<Void>.makeStream()
            let straggler = try await store.withLeadership(named: name) {
                Task {
                    try await store.withTransaction("a frozen leader's transaction") { connection in
                        insideContinuation.yield()
                        for await _ in finish { break }
                        _ = try await connection.query(
                            "UPDATE campaigns SET state_reason = 'first leader' WHERE campaign_id = \(campaign.id)", logger: PostgresFixture.logger
                        )
                    }
                }
            }
            let straggling = try #require(straggler)
            for await _ in inside { break }

            let seen = try await PostgresFixture.withStore { second in
                let contender = Task {
                    try await second.withLeadership(named: name) { try await second.campaign(campaign.id)?.stateReason }
                }
                // The second holds the lock now and waits to begin its epoch; then let the first commit.
                try await Self.waitForALockWait(on: "leadership_epochs", store)
                finishContinuation.yield()
                try await straggling.value
                return try await contender.value
            }
            #expect(seen == .some("first leader"), "the second leader read the first's committed write")
        }
    }

    /// Returns once a session waits for a row lock in a statement naming `table`.
    static func waitForALockWait(on table: String, _ store: CampaignStore) async throws {
        let deadline = ContinuousClock.now + .seconds(120)
        while true {
            let waiting = try await store.withConnection("look for lock waits") { connection in
                let rows = try await connection.query(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || \(table) || '%'",
                    logger: PostgresFixture.logger
                )
                for try await count in rows.decode(Int.self) { return count }
                return 0
            }
            if waiting > 0 { return }
            guard ContinuousClock.now < deadline else { throw TestSupportError("no session waited for a lock on \(table) within 120 s") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// A new campaign of its own topic, running.
    static func runningCampaign(in store: CampaignStore) async throws -> NewCampaign {
        let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("fence"))
        #expect(try await store.createCampaign(campaign))
        #expect(try await store.setState(campaign.id, to: .running, from: [.pending]))
        return campaign
    }
}
