/// Exponential backoff with full jitter, as a pure function of the attempt number.
///
/// | attempt | delay before it (before jitter) |
/// |---|---|
/// | 0 | none: the first connection, or a reconnect after a connection that made progress |
/// | 1 | `initial` |
/// | n | `initial × 2^(n-1)`, at most `maximum` |
///
/// With jitter the delay is drawn uniformly from `[delay/2, delay]`, so a fleet that lost its
/// connections at the same instant does not come back at the same instant.
public struct Backoff: Hashable, Sendable {
    /// The delay before the second attempt, in nanoseconds. Defaults to 100 milliseconds.
    public var initial: UInt64
    /// The longest delay, in nanoseconds. Defaults to 30 seconds.
    public var maximum: UInt64

    public init(initial: UInt64 = 100_000_000, maximum: UInt64 = 30_000_000_000) {
        self.initial = initial
        self.maximum = max(initial, maximum)
    }

    /// The delay before attempt `attempt` (0-based), without jitter, in nanoseconds.
    public func ceiling(attempt: Int) -> UInt64 {
        guard attempt > 0 else { return 0 }
        let doublings = min(attempt - 1, 40)
        let (delay, overflow) = self.initial.multipliedReportingOverflow(by: 1 << UInt64(doublings))
        return overflow ? self.maximum : min(delay, self.maximum)
    }

    /// The delay before attempt `attempt`, jittered with `random` (a value in `0...1`).
    public func delay(attempt: Int, random: Double) -> UInt64 {
        let ceiling = self.ceiling(attempt: attempt)
        let fraction = random.isNaN ? 1 : 0.5 + 0.5 * min(max(random, 0), 1)
        let delay = Double(ceiling) * fraction
        // Double(UInt64.max) rounds up to 2^64, which UInt64 cannot hold.
        return delay >= Double(UInt64.max) ? UInt64.max : UInt64(delay)
    }
}
