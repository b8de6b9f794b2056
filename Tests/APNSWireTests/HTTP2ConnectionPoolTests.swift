import APNSWire
import Testing

/// The HTTP/2 pool's decisions, input by input: spacing, backoff, replacement, liveness.
@Suite struct HTTP2ConnectionPoolTests {
    private static let ms: UInt64 = 1_000_000
    private static let second: UInt64 = 1_000_000_000

    /// Draws `value` every time: jitter at `random == 1` is none, so delays equal the ceiling.
    private struct Fixed: RandomNumberGenerator {
        var value: UInt64 = .max
        mutating func next() -> UInt64 { self.value }
    }

    private static func pool(
        positions: Int = 2, keepsOpen: Bool = false, spacing: UInt64 = 2 * second, timeout: UInt64 = 10 * second,
        ping: UInt64 = 60 * second
    ) -> HTTP2ConnectionPool {
        HTTP2ConnectionPool(
            configuration: .init(
                positions: positions, spacing: spacing, reconnectBackoff: Backoff(initial: 100 * ms, maximum: 30 * second),
                keepsConnectionsOpen: keepsOpen, requestTimeout: timeout, idlePingInterval: ping
            )
        )
    }

    private var random = Fixed()

    @Test mutating func opensNothingWithoutWorkUnlessKeptOpen() {
        var pool = Self.pool()
        #expect(pool.open(now: 0, hasWork: false, using: &self.random).isEmpty)
        var kept = Self.pool(keepsOpen: true)
        #expect(kept.open(now: 0, hasWork: false, using: &self.random).count == 2)
    }

    @Test mutating func spacesThePositionsFirstConnectionsFromThePoolsStart() {
        var pool = Self.pool(positions: 3)
        let openings = pool.open(now: 5 * Self.second, hasWork: true, using: &self.random)
        #expect(openings.map(\.member.position) == [0, 1, 2])
        #expect(openings.map(\.delay) == [0, 2 * Self.second, 4 * Self.second])
        #expect(pool.filling == openings.map { $0.member.id })
        #expect(Set(openings.map(\.member.id)).count == 3)
        // Nothing more while every position is filled.
        #expect(pool.open(now: 6 * Self.second, hasWork: true, using: &self.random).isEmpty)
    }

    @Test mutating func aFailedConnectFreesThePositionAndBacksOffDoubling() {
        var pool = Self.pool(positions: 1)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        for expected in [100 * Self.ms, 200 * Self.ms, 400 * Self.ms] {
            #expect(pool.connectFailed(&member) == true)
            #expect(pool.filling == [nil])
            #expect(pool.connectFailed(&member) == false)  // a second report of the same failure counts nothing
            let next = pool.open(now: 0, hasWork: true, using: &self.random)
            #expect(next.map(\.delay) == [expected])
            member = next[0].member
        }
        #expect(pool.failures == [3])
    }

    @Test mutating func theLaterOfBackoffAndSpacingApplies() {
        var pool = Self.pool(positions: 2, spacing: 150 * Self.ms)
        var openings = pool.open(now: 0, hasWork: true, using: &self.random)
        #expect(pool.connectFailed(&openings[0].member) == true)
        #expect(pool.connectFailed(&openings[0].member) == false)
        // Position 0 after one failure: 100 ms backoff, no spacing left.
        #expect(pool.open(now: 0, hasWork: true, using: &self.random).map(\.delay) == [100 * Self.ms])
        #expect(pool.connectFailed(&openings[1].member) == true)
        // Position 1 at 20 ms: 100 ms backoff against 130 ms left of its spacing.
        #expect(pool.open(now: 20 * Self.ms, hasWork: true, using: &self.random).map(\.delay) == [130 * Self.ms])
    }

    @Test mutating func anAnswerForgetsThePositionsFailures() {
        var pool = Self.pool(positions: 1)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.connectFailed(&member) == true)
        #expect(pool.connectFailed(&member) == false)
        member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.ready(&member, now: 0) == true)
        #expect(pool.failures == [1])
        pool.answered(&member)
        #expect(pool.failures == [0])
        #expect(member.madeProgress)
    }

    @Test mutating func aRetiredConnectionFreesItsPositionOnce() {
        var pool = Self.pool(positions: 1)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.ready(&member, now: 0) == true)
        #expect(pool.retire(member) == true)
        #expect(pool.filling == [nil])
        let replacement = pool.open(now: 0, hasWork: true, using: &self.random)
        #expect(replacement.map(\.delay) == [0])
        #expect(pool.retire(member) == false)  // the position is the replacement's now
        #expect(pool.filling == [replacement[0].member.id])
        // The retired connection closing later, having answered nothing, counts as a failure of
        // its position, and leaves the replacement in it alone.
        #expect(pool.closed(&member, now: Self.second, lostStreams: 0) == .closed(failed: true))
        #expect(pool.filling == [replacement[0].member.id])
        #expect(pool.failures == [1])
    }

    @Test mutating func aGoAwayBeforeAnyAnswerCountsAsAFailure() {
        var pool = Self.pool(positions: 1)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.ready(&member, now: 0) == true)
        #expect(pool.goAway(member, now: 0) == true)
        #expect(pool.failures == [1])
        #expect(pool.goAway(member, now: 0) == false)  // the second of a two-step shutdown
        #expect(pool.failures == [1])
        var next = pool.open(now: 0, hasWork: true, using: &self.random)[0]
        #expect(next.delay == 100 * Self.ms)
        #expect(pool.ready(&next.member, now: 0) == true)
        pool.answered(&next.member)
        #expect(pool.goAway(next.member, now: 0) == true)
        #expect(pool.failures == [0])
    }

    @Test mutating func aCloseBeforeReadyIsAFailedConnect() {
        var pool = Self.pool(positions: 1)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.closed(&member, now: 0, lostStreams: 0) == .failedToConnect)
        #expect(pool.closed(&member, now: 0, lostStreams: 0) == .ignored)
        #expect(pool.failures == [1])
    }

    @Test mutating func aCloseWithoutProgressIsAFailureUnlessAnIdleKeptConnectionTimedOut() {
        var pool = Self.pool(positions: 1)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.ready(&member, now: 0) == true)
        #expect(pool.closed(&member, now: 60 * Self.second, lostStreams: 0) == .closed(failed: true))

        var kept = Self.pool(positions: 1, keepsOpen: true)
        var idle = kept.open(now: 0, hasWork: false, using: &self.random)[0].member
        #expect(kept.ready(&idle, now: 0) == true)
        // Closed after serving nothing for a minute: the gateway's idle timeout, not a failure.
        #expect(kept.closed(&idle, now: 60 * Self.second, lostStreams: 0) == .closed(failed: false))
        #expect(kept.open(now: 60 * Self.second, hasWork: false, using: &self.random).map(\.delay) == [0])

        var soon = Self.pool(positions: 1, keepsOpen: true)
        var quick = soon.open(now: 0, hasWork: false, using: &self.random)[0].member
        #expect(soon.ready(&quick, now: 0) == true)
        // Closed within ten seconds of the handshake, or with streams lost: a failure.
        #expect(soon.closed(&quick, now: 5 * Self.second, lostStreams: 0) == .closed(failed: true))
        var lossy = soon.open(now: 5 * Self.second, hasWork: false, using: &self.random)[0].member
        #expect(soon.ready(&lossy, now: 5 * Self.second) == true)
        #expect(soon.closed(&lossy, now: 60 * Self.second, lostStreams: 3) == .closed(failed: true))
        #expect(soon.failures == [2])
    }

    /// APNs ends a connection that served nothing for a while with GOAWAY `IdleTimeout`. For a
    /// kept-open connection (the doorbell lane's, waiting for a ring) that is idleness, as the
    /// same close is: before, each such GOAWAY counted a failure, and after five a single failed
    /// connect took the gateway for unusable and refused the waiting rings.
    @Test mutating func aGoAwayToAnIdleKeptConnectionIsNoFailure() {
        var kept = Self.pool(positions: 1, keepsOpen: true)
        for round in 0..<6 {
            let now = UInt64(round) * 60 * Self.second
            var idle = kept.open(now: now, hasWork: false, using: &self.random)[0].member
            #expect(kept.ready(&idle, now: now) == true)
            #expect(kept.goAway(idle, now: now + 60 * Self.second) == true)
            #expect(kept.closed(&idle, now: now + 60 * Self.second, lostStreams: 0) == .closed(failed: false))
        }
        #expect(kept.failures == [0])

        // Soon after the handshake it is a failure, kept open or not.
        var early = kept.open(now: 0, hasWork: false, using: &self.random)[0].member
        #expect(kept.ready(&early, now: 0) == true)
        #expect(kept.goAway(early, now: 5 * Self.second) == true)
        #expect(kept.failures == [1])
    }

    @Test mutating func aCloseAfterProgressIsNoFailure() {
        var pool = Self.pool(positions: 1)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.ready(&member, now: 0) == true)
        pool.answered(&member)
        #expect(pool.closed(&member, now: Self.second, lostStreams: 5) == .closed(failed: false))
        #expect(pool.filling == [nil])
        #expect(pool.open(now: Self.second, hasWork: true, using: &self.random).map(\.delay) == [0])
    }

    @Test mutating func afterShutdownNothingOpensOrBecomesReadyOrCountsAFailedConnect() {
        var pool = Self.pool(positions: 2)
        var openings = pool.open(now: 0, hasWork: true, using: &self.random)
        #expect(pool.ready(&openings[0].member, now: 0) == true)
        pool.shutdown()
        #expect(pool.filling == [nil, nil])
        #expect(pool.ready(&openings[1].member, now: 0) == false)
        #expect(pool.connectFailed(&openings[1].member) == false)
        #expect(pool.closed(&openings[0].member, now: 0, lostStreams: 0) == .closed(failed: false))
        #expect(pool.failures == [0, 0])
        #expect(pool.open(now: 0, hasWork: true, using: &self.random).isEmpty)
    }

    @Test mutating func aQuietConnectionIsPingedAndGivenUpWhenThePingGoesUnanswered() {
        var pool = Self.pool(positions: 1, timeout: 10 * Self.second, ping: 60 * Self.second)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.check(&member, now: 0, inFlight: false, oldestSentAt: nil) == .nothing)  // not ready yet
        #expect(pool.ready(&member, now: 0) == true)
        #expect(pool.check(&member, now: 59 * Self.second, inFlight: false, oldestSentAt: nil) == .nothing)
        pool.activity(&member, now: 30 * Self.second)
        #expect(pool.check(&member, now: 60 * Self.second, inFlight: false, oldestSentAt: nil) == .nothing)
        #expect(pool.check(&member, now: 90 * Self.second, inFlight: false, oldestSentAt: nil) == .ping)
        #expect(pool.check(&member, now: 100 * Self.second, inFlight: false, oldestSentAt: nil) == .nothing)
        #expect(pool.check(&member, now: 100 * Self.second + 1, inFlight: false, oldestSentAt: nil) == .giveUpPingUnanswered)
        pool.pingAnswered(&member)
        // Answered: the next ping is a whole interval after the last one.
        #expect(pool.check(&member, now: 120 * Self.second, inFlight: false, oldestSentAt: nil) == .nothing)
        #expect(pool.check(&member, now: 150 * Self.second, inFlight: false, oldestSentAt: nil) == .ping)
    }

    @Test mutating func anOverdueAnswerGivesTheConnectionUpAndStreamsInFlightAreNeverPinged() {
        var pool = Self.pool(positions: 1, timeout: 10 * Self.second, ping: 60 * Self.second)
        var member = pool.open(now: 0, hasWork: true, using: &self.random)[0].member
        #expect(pool.ready(&member, now: 0) == true)
        let sent = 100 * Self.second
        #expect(pool.check(&member, now: sent + 10 * Self.second, inFlight: true, oldestSentAt: sent) == .nothing)
        #expect(pool.check(&member, now: sent + 10 * Self.second + 1, inFlight: true, oldestSentAt: sent) == .giveUpAnswerOverdue)
        // In flight, the oldest answered: no ping however quiet.
        #expect(pool.check(&member, now: 500 * Self.second, inFlight: true, oldestSentAt: nil) == .nothing)
    }

    @Test func checksEveryQuarterOfTheShorterTimeBetweenTenMillisecondsAndOneSecond() {
        #expect(Self.pool(timeout: 10 * Self.second, ping: 60 * Self.second).checkInterval == Self.second)
        #expect(Self.pool(timeout: 2 * Self.second, ping: 60 * Self.second).checkInterval == 500 * Self.ms)
        #expect(Self.pool(timeout: 10 * Self.second, ping: 400 * Self.ms).checkInterval == 100 * Self.ms)
        #expect(Self.pool(timeout: 20 * Self.ms, ping: 60 * Self.second).checkInterval == 10 * Self.ms)
    }
}
