public import APNSWire
public import PushFleetCore
import NIOConcurrencyHelpers

/// The feedback service's list: tokens to which a notification was accepted although the app is
/// gone, with the time that was noticed. Reading the list clears it, as APNs did.
public final class FeedbackStore: Sendable {
    private let pending = NIOLockedValueBox([DeviceToken: UInt32]())

    public init() {}

    /// Notes that `token` is unregistered as of `timestamp` (epoch seconds); a later time wins.
    public func add(_ token: DeviceToken, timestamp: UInt32) {
        self.pending.withLockedValue { pending in
            pending[token] = max(pending[token] ?? 0, timestamp)
        }
    }

    /// Returns every pending tuple and clears the list.
    public func drain() -> [FeedbackTuple] {
        let taken = self.pending.withLockedValue { pending in
            defer { pending.removeAll() }
            return pending
        }
        return taken.map { FeedbackTuple(timestamp: $0.value, token: $0.key) }.sorted { $0.timestamp < $1.timestamp }
    }

    /// The number of tuples waiting to be read.
    public var count: Int { self.pending.withLockedValue { $0.count } }

    public func reset() { self.pending.withLockedValue { $0.removeAll() } }
}
