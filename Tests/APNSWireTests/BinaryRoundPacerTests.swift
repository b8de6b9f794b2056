import APNSWire
import Testing

/// The pacer's advice from measured rounds: enough frames that writing takes four times the pause.
@Suite struct BinaryRoundPacerTests {
    private static let millisecond: UInt64 = 1_000_000

    @Test func asksForOneBatchUntilARoundAndItsPauseAreMeasured() {
        var pacer = BinaryRoundPacer(bound: 20_000, minimum: 100)
        #expect(pacer.framesWanted == 100)
        pacer.roundWritten(frames: 4_000, nanoseconds: 40 * Self.millisecond)
        #expect(pacer.framesWanted == 100)  // no pause measured yet
        pacer.resumed(afterPauseOf: 10 * Self.millisecond)
        // 100,000 frames/s × 10 ms × 4
        #expect(pacer.framesWanted == 4_000)
    }

    @Test func aLongErrorDelayAsksForMoreUpToTheBound() {
        var pacer = BinaryRoundPacer(bound: 20_000, minimum: 100)
        pacer.roundWritten(frames: 4_000, nanoseconds: 40 * Self.millisecond)
        pacer.resumed(afterPauseOf: 30 * Self.millisecond)
        #expect(pacer.framesWanted == 12_000)
        pacer.resumed(afterPauseOf: 500 * Self.millisecond)  // 200,000 wanted
        #expect(pacer.framesWanted == 20_000)
    }

    @Test func aFastGatewayNeedsFewFrames() {
        var pacer = BinaryRoundPacer(bound: 20_000, minimum: 100)
        pacer.roundWritten(frames: 1_000, nanoseconds: 100 * Self.millisecond)  // 10,000 frames/s
        pacer.resumed(afterPauseOf: Self.millisecond / 2)  // 20 frames wanted: one batch
        #expect(pacer.framesWanted == 100)
    }

    @Test func followsTheLatestMeasurements() {
        var pacer = BinaryRoundPacer(bound: 50_000, minimum: 100)
        pacer.roundWritten(frames: 10_000, nanoseconds: 100 * Self.millisecond)  // 100,000/s
        pacer.resumed(afterPauseOf: 50 * Self.millisecond)
        #expect(pacer.framesWanted == 20_000)
        pacer.roundWritten(frames: 10_000, nanoseconds: 200 * Self.millisecond)  // slower: 50,000/s
        #expect(pacer.framesWanted == 10_000)
        pacer.resumed(afterPauseOf: 100 * Self.millisecond)
        #expect(pacer.framesWanted == 20_000)
    }

    @Test func aRoundWrittenInOneGoCountsAsAMillisecond() {
        var pacer = BinaryRoundPacer(bound: 20_000, minimum: 100)
        pacer.roundWritten(frames: 100, nanoseconds: 0)  // 100,000/s, not infinitely fast
        pacer.resumed(afterPauseOf: 10 * Self.millisecond)
        #expect(pacer.framesWanted == 4_000)
    }

    @Test func anEmptyRoundChangesNothing() {
        var pacer = BinaryRoundPacer(bound: 20_000, minimum: 100)
        pacer.roundWritten(frames: 1_000, nanoseconds: 10 * Self.millisecond)
        pacer.resumed(afterPauseOf: 10 * Self.millisecond)
        let before = pacer.framesWanted
        pacer.roundWritten(frames: 0, nanoseconds: 10 * Self.millisecond)
        #expect(pacer.framesWanted == before)
    }

    @Test func theMinimumNeverExceedsTheBound() {
        let pacer = BinaryRoundPacer(bound: 50, minimum: 100)
        #expect(pacer.framesWanted == 50)
        #expect(pacer.minimum == 50)
    }
}
