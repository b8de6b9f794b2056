import APNSWire
import Testing

private let millisecond: UInt64 = 1_000_000
private let second: UInt64 = 1_000_000_000

@Suite struct BackoffTests {
    @Test func defaultsAre100MillisecondsAnd30Seconds() {
        let backoff = Backoff()
        #expect(backoff.initial == 100 * millisecond)
        #expect(backoff.maximum == 30 * second)
    }

    /// attempt → delay before it, without jitter, for the defaults (100 ms doubling up to 30 s).
    static let defaultTable: [(attempt: Int, ceiling: UInt64)] = [
        (0, 0),  // first connection: no delay
        (1, 100 * millisecond),  // initial
        (2, 200 * millisecond),
        (3, 400 * millisecond),
        (4, 800 * millisecond),
        (5, 1_600 * millisecond),
        (8, 12_800 * millisecond),
        (9, 25_600 * millisecond),
        (10, 30 * second),  // 51.2 s, capped
        (11, 30 * second),
        (41, 30 * second),
        (42, 30 * second),
        (64, 30 * second),
        (65, 30 * second),
        (1_000, 30 * second),  // no overflow however large the attempt
        (Int.max, 30 * second),
        (-1, 0),
        (Int.min, 0),
    ]

    @Test(arguments: defaultTable)
    func ceilingDoublesFromInitialUpToMaximum(attempt: Int, expected: UInt64) {
        #expect(Backoff().ceiling(attempt: attempt) == expected)
    }

    @Test func ceilingIsMonotonic() {
        let backoff = Backoff(initial: 3 * millisecond, maximum: 7 * second)
        var previous: UInt64 = 0
        for attempt in 0...200 {
            let ceiling = backoff.ceiling(attempt: attempt)
            #expect(ceiling >= previous, "attempt \(attempt)")
            #expect(ceiling <= 7 * second)
            previous = ceiling
        }
        #expect(previous == 7 * second)
    }

    @Test func largeInitialDelaysDoNotOverflow() {
        let half = Backoff(initial: UInt64.max / 2, maximum: UInt64.max)
        #expect(half.ceiling(attempt: 1) == UInt64.max / 2)
        #expect(half.ceiling(attempt: 2) == UInt64.max - 1)
        #expect(half.ceiling(attempt: 3) == UInt64.max)  // would overflow: the maximum
        #expect(half.ceiling(attempt: 1_000) == UInt64.max)

        let oneNanosecond = Backoff(initial: 1, maximum: UInt64.max)
        #expect(oneNanosecond.ceiling(attempt: 41) == UInt64(1) << 40)
        #expect(oneNanosecond.ceiling(attempt: 1_000) >= UInt64(1) << 40)
    }

    @Test func maximumBelowInitialIsRaisedToInitial() {
        let backoff = Backoff(initial: 5 * second, maximum: 1 * second)
        #expect(backoff.maximum == 5 * second)
        #expect(backoff.ceiling(attempt: 1) == 5 * second)
        #expect(backoff.ceiling(attempt: 2) == 5 * second)
    }

    @Test func zeroInitialNeverWaits() {
        let backoff = Backoff(initial: 0, maximum: 10 * second)
        #expect(backoff.ceiling(attempt: 1) == 0)
        #expect(backoff.ceiling(attempt: 50) == 0)
    }

    // MARK: - Jitter

    @Test func jitterEndpointsAreHalfAndFullCeiling() {
        let backoff = Backoff()
        #expect(backoff.delay(attempt: 3, random: 0) == 200 * millisecond)
        #expect(backoff.delay(attempt: 3, random: 1) == 400 * millisecond)
        #expect(backoff.delay(attempt: 3, random: 0.5) == 300 * millisecond)
        #expect(backoff.delay(attempt: 0, random: 1) == 0)
        #expect(backoff.delay(attempt: 0, random: 0) == 0)
        // Out-of-range randomness is clamped to 0...1.
        #expect(backoff.delay(attempt: 3, random: -5) == 200 * millisecond)
        #expect(backoff.delay(attempt: 3, random: 7) == 400 * millisecond)
        #expect(backoff.delay(attempt: 3, random: -.infinity) == 200 * millisecond)
        #expect(backoff.delay(attempt: 3, random: .infinity) == 400 * millisecond)
    }

    @Test(arguments: [
        Backoff(),
        Backoff(initial: 1, maximum: 1_000),
        Backoff(initial: 7, maximum: 999),
        Backoff(initial: 250 * millisecond, maximum: 60 * second),
    ])
    func jitterStaysWithinHalfCeilingAndCeiling(backoff: Backoff) {
        for attempt in 0...64 {
            let ceiling = backoff.ceiling(attempt: attempt)
            for step in 0...20 {
                let random = Double(step) / 20
                let delay = backoff.delay(attempt: attempt, random: random)
                #expect(delay >= ceiling / 2, "attempt \(attempt), random \(random)")
                #expect(delay <= ceiling, "attempt \(attempt), random \(random)")
            }
        }
    }

    @Test func jitterGrowsWithRandomness() {
        let backoff = Backoff()
        let delays = (0...100).map { backoff.delay(attempt: 6, random: Double($0) / 100) }
        #expect(delays == delays.sorted())
        #expect(delays.first == 1_600 * millisecond)
        #expect(delays.last == 3_200 * millisecond)
    }

    /// Regression: a maximum of `UInt64.max` ("no cap") makes the ceiling `UInt64.max`, which `Double`
    /// rounds up to 2^64, and `UInt64(2^64)` traps. `random` of exactly 1 is a legal input
    /// (`Double.random(in: 0...1)` can return it). Runs in a child process so a trap fails only this test.
    @Test func jitterAtTheLargestCeilingDoesNotTrap() async {
        await #expect(processExitsWith: .success) {
            let backoff = Backoff(initial: 1_000_000_000, maximum: UInt64.max)
            let delay = backoff.delay(attempt: 100, random: 1)
            precondition(delay >= UInt64.max / 2)
        }
    }
}
