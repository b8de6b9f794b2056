public import Foundation

/// What an in-memory double throws from a call a test asked to fail
/// (``InMemoryCoordinatorQueue/failNext(_:campaign:)``, ``InMemoryCoordinatorStore/failNext(_:campaign:)``),
/// as a Redis or Postgres that stopped answering would.
public struct InjectedFailure: Error, Hashable, Sendable, CustomStringConvertible {
    /// The method's name, without its arguments: `snapshot`, `apply`.
    public var method: String
    /// The campaign the failed call was about.
    public var campaign: UUID?

    public var description: String { "injected failure of \(self.method) (campaign \(self.campaign.map { "\($0)" } ?? "none"))" }
}

/// The calls a test asked a double to fail: each plan fails the next call of its method, for its
/// campaign or (without one) for any, and is then used up.
struct InjectedFailures: Sendable {
    private var plans: [(method: String, campaign: UUID?)] = []

    mutating func add(_ method: String, campaign: UUID?) {
        self.plans.append((method, campaign))
    }

    /// Throws when a plan names this call, and uses the plan up.
    /// - Parameter function: The caller's `#function` (`snapshot(campaign:)`); its name before `(` is matched.
    mutating func check(_ function: String, campaign: UUID?) throws(InjectedFailure) {
        let method = String(function.prefix { $0 != "(" })
        guard let index = self.plans.firstIndex(where: { $0.method == method && ($0.campaign == nil || $0.campaign == campaign) }) else {
            return
        }
        self.plans.remove(at: index)
        throw InjectedFailure(method: method, campaign: campaign)
    }
}

/// A Redis stream id (`milliseconds-sequence`), ordered as Redis and the store order them. An empty
/// text reads as `0-0` and a bare `milliseconds` as `milliseconds-0`, as the store reads them.
struct StreamID: Comparable, Hashable, Sendable, CustomStringConvertible {
    var milliseconds: UInt64
    var sequence: UInt64

    init(milliseconds: UInt64, sequence: UInt64) {
        self.milliseconds = milliseconds
        self.sequence = sequence
    }

    /// Nil for a text that is not a stream id.
    init?(_ text: String) {
        if text.isEmpty {
            self.init(milliseconds: 0, sequence: 0)
            return
        }
        let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard let milliseconds = UInt64(parts[0]), let sequence = parts.count == 2 ? UInt64(parts[1]) : 0 else { return nil }
        self.init(milliseconds: milliseconds, sequence: sequence)
    }

    var description: String { "\(self.milliseconds)-\(self.sequence)" }

    static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.milliseconds, lhs.sequence) < (rhs.milliseconds, rhs.sequence)
    }
}
