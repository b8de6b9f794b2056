import APNSWire
import Testing

/// The binary connection's decisions, input by input: generations, backoff, round size, pacing.
@Suite struct BinaryConnectionCycleTests {
    private static let ms: UInt64 = 1_000_000

    /// Draws `value` every time: jitter at `random == 1` is none, so delays equal the ceiling.
    private struct Fixed: RandomNumberGenerator {
        mutating func next() -> UInt64 { .max }
    }

    private var random = Fixed()

    private static func cycle(confirmEvery: Int = 1_000, batchSize: Int = 100) -> BinaryConnectionCycle {
        BinaryConnectionCycle(backoff: Backoff(initial: 100 * ms, maximum: 10_000 * ms), confirmEvery: confirmEvery, batchSize: batchSize)
    }

    /// Connects and readies generation after generation; returns the ready one.
    private mutating func connected(_ cycle: inout BinaryConnectionCycle, now: UInt64 = 0) -> Int {
        let connect = cycle.connectIfNeeded(hasWork: true, using: &self.random)!
        let ready = cycle.ready(generation: connect.generation, now: now)
        #expect(ready == true)
        return connect.generation
    }

    @Test mutating func connectsOnlyWithWorkAndOneConnectionAtATime() {
        var cycle = Self.cycle()
        #expect(cycle.connectIfNeeded(hasWork: false, using: &self.random) == nil)
        let first = cycle.connectIfNeeded(hasWork: true, using: &self.random)
        #expect(first?.generation == 1 && first?.delay == 0)
        #expect(cycle.connectIfNeeded(hasWork: true, using: &self.random) == nil)
        #expect(cycle.state == .connecting(generation: 1))
    }

    @Test mutating func failedConnectsBackOffDoublingAndALateReportChangesNothing() {
        var cycle = Self.cycle()
        var delays: [UInt64] = []
        for generation in 1...4 {
            let connect = cycle.connectIfNeeded(hasWork: true, using: &self.random)!
            #expect(connect.generation == generation)
            delays.append(connect.delay)
            let failed = cycle.connectFailed(generation: generation)
            #expect(failed == true)
            let late = cycle.connectFailed(generation: generation)
            #expect(late == false)
        }
        #expect(delays == [0, 100 * Self.ms, 200 * Self.ms, 400 * Self.ms])
        #expect(cycle.failedAttempts == 4)
        // A handshake completing for an old generation is refused: close it.
        let connect = cycle.connectIfNeeded(hasWork: true, using: &self.random)!
        let stale = cycle.ready(generation: connect.generation - 1, now: 0)
        #expect(stale == false)
        #expect(cycle.state == .connecting(generation: 5))
    }

    @Test mutating func aCloseDuringTheHandshakeIsAFailedAttempt() {
        var cycle = Self.cycle()
        let connect = cycle.connectIfNeeded(hasWork: true, using: &self.random)!
        #expect(cycle.closed(generation: connect.generation, unconfirmed: 0) == .failedToConnect)
        #expect(cycle.failedAttempts == 1)
        #expect(cycle.closed(generation: connect.generation, unconfirmed: 0) == .ignored)
        #expect(cycle.state == .idle)
    }

    @Test mutating func aRoundIsFullAtItsLimitAndTheSentinelStopsWriting() {
        var cycle = Self.cycle(confirmEvery: 300, batchSize: 100)
        let generation = self.connected(&cycle)
        #expect(cycle.writingGeneration == generation)
        #expect(cycle.room(unconfirmed: 0) == 300)
        #expect(cycle.room(unconfirmed: 250) == 50)
        #expect(!cycle.roundIsFull(unconfirmed: 299))
        #expect(cycle.roundIsFull(unconfirmed: 300))
        #expect(cycle.sentinelWritten(frames: 300, now: 0) == generation)
        #expect(cycle.writingGeneration == nil)
        #expect(cycle.sentinelWritten(frames: 300, now: 0) == nil)  // one sentinel per connection
        #expect(cycle.proofOverdue(generation: generation))
        #expect(!cycle.proofOverdue(generation: generation + 1))
    }

    @Test mutating func aRejectionHalvesTheRoundAndCleanProofsDoubleIt() {
        var cycle = Self.cycle(confirmEvery: 800, batchSize: 100)
        var limits: [Int] = []
        for rejected in [true, true, true, true, false, false, false, false] {
            let generation = self.connected(&cycle)
            #expect(cycle.errorResponseArrived(generation: generation) == true)
            cycle.settled(identifierMatched: true, rejectedNotification: rejected, resent: rejected ? 5 : 0)
            #expect(cycle.closed(generation: generation, unconfirmed: 0) == .afterErrorResponse)
            limits.append(cycle.room(unconfirmed: 0))
        }
        #expect(limits == [400, 200, 100, 100, 200, 400, 800, 800])
    }

    @Test mutating func aProofThatLeavesFramesUnprovenKeepsTheRound() {
        var cycle = Self.cycle(confirmEvery: 800, batchSize: 100)
        var generation = self.connected(&cycle)
        #expect(cycle.errorResponseArrived(generation: generation) == true)
        cycle.settled(identifierMatched: true, rejectedNotification: true, resent: 0)
        _ = cycle.closed(generation: generation, unconfirmed: 0)
        #expect(cycle.room(unconfirmed: 0) == 400)
        generation = self.connected(&cycle)
        #expect(cycle.errorResponseArrived(generation: generation) == true)
        cycle.settled(identifierMatched: true, rejectedNotification: false, resent: 3)  // e.g. a shutdown status
        #expect(cycle.room(unconfirmed: 0) == 400)
    }

    /// A round whose fate stayed unknown (a silent close with frames unconfirmed, an error response
    /// naming no frame) is a failed attempt and leaves an eighth of the round, down to one frame: a
    /// frame that makes the gateway drop the connection every time is soon in a small round. A
    /// matched proof forgets the failures; clean ones double the round again, and a rejection
    /// never makes a small round larger.
    @Test mutating func aRoundOfUnknownFateIsAFailureAndShrinksTheRoundToOneFrame() {
        var cycle = Self.cycle(confirmEvery: 20_000, batchSize: 100)
        var limits: [Int] = []
        for step in 0..<6 {
            let generation = self.connected(&cycle)
            if step.isMultiple(of: 2) {
                #expect(cycle.closed(generation: generation, unconfirmed: 7) == .lost)  // a silent close
            } else {
                #expect(cycle.errorResponseArrived(generation: generation) == true)
                cycle.settled(identifierMatched: false, rejectedNotification: false, resent: 9)
                _ = cycle.closed(generation: generation, unconfirmed: 0)
            }
            limits.append(cycle.room(unconfirmed: 0))
        }
        #expect(limits == [2_500, 312, 39, 4, 1, 1])
        #expect(cycle.failedAttempts == 6)
        var generation = self.connected(&cycle)
        #expect(cycle.errorResponseArrived(generation: generation) == true)
        cycle.settled(identifierMatched: true, rejectedNotification: false, resent: 0)
        #expect(cycle.failedAttempts == 0 && cycle.room(unconfirmed: 0) == 2)
        _ = cycle.closed(generation: generation, unconfirmed: 0)
        generation = self.connected(&cycle)
        #expect(cycle.errorResponseArrived(generation: generation) == true)
        cycle.settled(identifierMatched: true, rejectedNotification: true, resent: 0)
        #expect(cycle.room(unconfirmed: 0) == 2)
    }

    @Test mutating func aCloseWithNothingUnconfirmedIsNoFailure() {
        var cycle = Self.cycle()
        let generation = self.connected(&cycle)
        #expect(cycle.closed(generation: generation, unconfirmed: 0) == .lost)
        #expect(cycle.failedAttempts == 0)
        #expect(cycle.connectIfNeeded(hasWork: true, using: &self.random)?.delay == 0)
    }

    @Test mutating func reportsAboutAnOlderConnectionAreIgnored() {
        var cycle = Self.cycle()
        let old = self.connected(&cycle)
        #expect(cycle.errorResponseArrived(generation: old) == true)
        _ = cycle.closed(generation: old, unconfirmed: 0)
        let current = self.connected(&cycle)
        #expect(cycle.errorResponseArrived(generation: old) == false)
        #expect(cycle.closed(generation: old, unconfirmed: 3) == .ignored)
        #expect(cycle.writingGeneration == current)
        // A second error response on the same connection settles nothing more.
        #expect(cycle.errorResponseArrived(generation: current) == true)
        #expect(cycle.errorResponseArrived(generation: current) == false)
    }

    @Test mutating func thePacerLearnsFromTheRoundAndThePauseBeforeTheNextConnection() {
        var cycle = Self.cycle(confirmEvery: 20_000, batchSize: 100)
        let generation = self.connected(&cycle, now: 0)
        #expect(cycle.pacer.framesWanted == 100)
        cycle.roundStarted(now: 10 * Self.ms)
        _ = cycle.sentinelWritten(frames: 4_000, now: 50 * Self.ms)  // 100,000 frames/s
        #expect(cycle.errorResponseArrived(generation: generation) == true)
        _ = cycle.closed(generation: generation, unconfirmed: 0)
        _ = self.connected(&cycle, now: 60 * Self.ms)  // paused 10 ms after the sentinel
        #expect(cycle.pacer.framesWanted == 4_000)
    }

    @Test mutating func afterShutdownNothingConnects() {
        var cycle = Self.cycle()
        let generation = self.connected(&cycle)
        cycle.shutdown()
        #expect(cycle.connectIfNeeded(hasWork: true, using: &self.random) == nil)
        #expect(cycle.closed(generation: generation, unconfirmed: 4) == .ignored)
        #expect(cycle.writingGeneration == nil)
    }
}
