import Synchronization

/// Tells long-running services to stop taking new work and finish what they hold (SIGTERM).
public final class DrainSignal: Sendable {
    private let triggered = Atomic<Bool>(false)

    public init() {}

    public func trigger() { self.triggered.store(true, ordering: .releasing) }

    public var isTriggered: Bool { self.triggered.load(ordering: .acquiring) }

    /// Sleeps for `duration`, returning early once triggered.
    public func sleep(for duration: Duration) async {
        let step = Duration.milliseconds(50)
        var left = duration
        while left > .zero, !self.isTriggered, !Task.isCancelled {
            try? await Task.sleep(for: min(step, left))
            left -= step
        }
    }
}
