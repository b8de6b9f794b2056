public import Foundation
public import PushFleetCore
public import PushFleetRedis
public import PushFleetServices
import Synchronization

/// A ``ShardQueue`` in memory: one shard's tokens, the holder's fence, and everything a run did
/// to it, as the worker's Redis scripts would record it. A test hands the shard to another
/// holder (``takeOver()``), fails the next call of a method (``failNext(_:)``) or sets the
/// campaign's status, and reads back the checkpoints.
public final class InMemoryShardQueue: ShardQueue {
    private struct State {
        var tokens: [DeviceToken]
        var fence: Int
        var status = CampaignQueueStatus.running
        /// Sequences applied, so that a repeated checkpoint counts once, as in Redis.
        var applied: Set<Int> = []
        var checkpoints: [CheckpointDelta] = []
        var cursor = 0
        var completed = false
        var released: [Int] = []
        var pauses: [(reason: String, outage: Bool)] = []
        var reads = 0
        var failures = InjectedFailures()
    }

    private let state: Mutex<State>

    /// `tokens` make the shard; `lease` (``lease``) is its first holder's.
    public init(tokens: [DeviceToken], fence: Int = 1) {
        self.state = Mutex(State(tokens: tokens, fence: fence))
    }

    /// The current holder's lease, from the start of the shard, with `delivered` positions an
    /// earlier holder left.
    public func lease(campaign: UUID = UUID(uuidString: "00000000-0000-0000-0000-00000000000A")!, delivered: [Int] = []) -> ShardLease {
        let (fence, count) = self.state.withLock { ($0.fence, $0.tokens.count) }
        return ShardLease(campaign: campaign, shard: 0, owner: "worker-a", fence: fence, cursor: 0, attempts: 1, tokenCount: count, delivered: delivered)
    }

    /// Another worker claims the shard: every call with the old fence is refused from now on.
    public func takeOver() { self.state.withLock { $0.fence += 1 } }
    /// The status the next checkpoints return (pause, cancel).
    public func setStatus(_ status: CampaignQueueStatus) { self.state.withLock { $0.status = status } }
    /// The next call of `method` (`read`, `checkpoint`, `complete`, `release`, `requestPause`)
    /// throws, as a Redis that stopped answering would.
    public func failNext(_ method: String) { self.state.withLock { $0.failures.add(method, campaign: nil) } }

    /// Checkpoints applied, in order, each once.
    public var checkpoints: [CheckpointDelta] { self.state.withLock { $0.checkpoints } }
    /// The highest cursor a checkpoint raised.
    public var cursor: Int { self.state.withLock { $0.cursor } }
    public var isCompleted: Bool { self.state.withLock { $0.completed } }
    /// Cursors the shard was released at.
    public var releases: [Int] { self.state.withLock { $0.released } }
    public var pauseRequests: [(reason: String, outage: Bool)] { self.state.withLock { $0.pauses } }
    /// Successful reads.
    public var reads: Int { self.state.withLock { $0.reads } }

    public func read(_ lease: ShardLease, from index: Int, count: Int, clock: Int?, personalized: Bool) async throws -> ShardWindow? {
        try self.state.withLock { state in
            try state.failures.check(#function, campaign: nil)
            guard lease.fence == state.fence else { return nil }
            state.reads += 1
            let end = min(state.tokens.count, index + count)
            return ShardWindow(tokens: index < end ? Array(state.tokens[index..<end]) : [], retryAfter: nil)
        }
    }

    public func checkpoint(_ lease: ShardLease, _ delta: CheckpointDelta, leaseMilliseconds: Int) async throws -> CheckpointResult {
        try self.state.withLock { state in
            try state.failures.check(#function, campaign: nil)
            guard lease.fence == state.fence else { return .leaseLost }
            if state.applied.insert(delta.sequence).inserted {
                state.checkpoints.append(delta)
                state.cursor = max(state.cursor, delta.cursor)
            }
            return .ok(state.status)
        }
    }

    public func complete(_ lease: ShardLease) async throws -> Bool {
        try self.state.withLock { state in
            try state.failures.check(#function, campaign: nil)
            guard lease.fence == state.fence else { return false }
            state.completed = true
            return true
        }
    }

    public func release(_ lease: ShardLease, cursor: Int, delivered: [Int], countAttempt: Bool) async throws -> Bool {
        try self.state.withLock { state in
            try state.failures.check(#function, campaign: nil)
            guard lease.fence == state.fence else { return false }
            state.released.append(cursor)
            return true
        }
    }

    public func requestPause(campaign: UUID, reason: String, outage: Bool) async throws -> Bool {
        try self.state.withLock { state in
            try state.failures.check(#function, campaign: nil)
            state.pauses.append((reason, outage))
            return true
        }
    }
}
