import Foundation
import Synchronization

/// Which campaigns a worker's slots hold, and which of them the fleet's rate limit has been
/// holding back, so that a throttled campaign does not take every slot.
///
/// A slot keeps to one campaign while it has shards of it, and a throttled shard keeps its slot
/// for as long as its bucket makes it wait. Unchecked, every slot that once picked a throttled
/// campaign would stay on it until its last shard was claimed, and the other campaigns of the
/// topic would get none. So: a slot picking work tries the campaigns no other slot of this worker
/// is pacing first, and a slot pacing a campaign another slot also paces takes no more of its
/// shards (it picks again once its shards are done). A throttled campaign with nothing beside it
/// still gets every slot.
final class PacedCampaigns: Sendable {
    /// How long a campaign counts as paced after a read was told to wait.
    static let memory: Duration = .seconds(5)

    private struct State {
        var holders: [UUID: Int] = [:]
        var pacedAt: [UUID: ContinuousClock.Instant] = [:]
    }

    private let state = Mutex(State())
    private let now: @Sendable () -> ContinuousClock.Instant

    init(now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) { self.now = now }

    /// A slot took up `campaign`.
    func hold(_ campaign: UUID) { self.state.withLock { $0.holders[campaign, default: 0] += 1 } }

    /// A slot is done with `campaign`.
    func release(_ campaign: UUID) {
        self.state.withLock { state in
            let left = (state.holders[campaign] ?? 1) - 1
            state.holders[campaign] = left > 0 ? left : nil
            if left <= 0 { state.pacedAt[campaign] = nil }
        }
    }

    /// A read of `campaign` was told to wait by its rate limit.
    func paced(_ campaign: UUID) {
        let at = self.now()
        self.state.withLock { $0.pacedAt[campaign] = at }
    }

    /// Whether a read of `campaign` was told to wait lately.
    func isPaced(_ campaign: UUID) -> Bool {
        let now = self.now()
        return self.state.withLock { state in state.pacedAt[campaign].map { now - $0 < Self.memory } ?? false }
    }

    /// Whether a slot holding `campaign` should take no more of its shards: it is paced, and
    /// another slot of this worker holds it too.
    func shouldYield(_ campaign: UUID) -> Bool {
        let now = self.now()
        return self.state.withLock { state in
            guard let at = state.pacedAt[campaign], now - at < Self.memory else { return false }
            return (state.holders[campaign] ?? 0) > 1
        }
    }

    /// `candidates` with the campaigns a slot of this worker is pacing moved to the end, in their order.
    func preferringUnpaced(_ candidates: [UUID]) -> [UUID] {
        let now = self.now()
        let busy = self.state.withLock { state in
            Set(state.pacedAt.filter { now - $0.value < Self.memory && (state.holders[$0.key] ?? 0) > 0 }.keys)
        }
        return candidates.filter { !busy.contains($0) } + candidates.filter { busy.contains($0) }
    }
}
