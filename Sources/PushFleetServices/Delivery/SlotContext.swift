import APNSTransport
import PushFleetCore
import Synchronization

/// What a slot's shard runs share: the channel, the routing of its outcomes to the run that sent
/// them, the channel's write deadline (the earliest of the runs' lease deadlines) and the count of
/// repeats not yet reported.
final class SlotContext: Sendable {
    /// Tag bits naming the run; the low 32 bits are the token's index in its shard.
    static let runTagMask: UInt64 = 0xFFFF_FFFF_0000_0000

    private struct State {
        var runs: [UInt64: AsyncStream<SlotInput>.Continuation] = [:]
        var deadlines: [UInt64: ContinuousClock.Instant] = [:]
        var halted = false
        var reportedResent = 0
        var reportedRetried = 0
        /// The channel's totals as last read; refreshed in the background so that a heartbeat never
        /// waits for a busy event loop.
        var totals = (resent: 0, retried: 0)
    }

    let channel: any DeliveryChannel
    private let state = Mutex(State())

    init(channel: any DeliveryChannel) {
        self.channel = channel
    }

    /// Passes the channel's outcomes to their runs until the channel is shut down, and keeps a
    /// recent reading of its repeats.
    func startRouting() -> Task<Void, Never> {
        let poller = Task {
            while !Task.isCancelled {
                await self.refreshRepeats()
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        return Task {
            for await batch in self.channel.outcomes { self.route(batch) }
            poller.cancel()
        }
    }

    private func refreshRepeats() async {
        let totals = await self.channel.totals()
        self.state.withLock { state in
            state.totals = (max(state.totals.resent, totals.resent), max(state.totals.retried, totals.retried))
        }
    }

    private func route(_ batch: [DeliveryOutcome]) {
        FleetMetrics.shared.count(batch)
        var start = 0
        while start < batch.count {
            let runTag = batch[start].tag & Self.runTagMask
            var end = start + 1
            while end < batch.count, batch[end].tag & Self.runTagMask == runTag { end += 1 }
            let continuation = self.state.withLock { $0.runs[runTag] }
            // A run that ended has no continuation: its late outcomes are dropped.
            continuation?.yield(.outcomes(batch[start..<end]))
            start = end
        }
    }

    func register(_ runTag: UInt64, _ continuation: AsyncStream<SlotInput>.Continuation) {
        self.state.withLock { $0.runs[runTag] = continuation }
    }

    func unregister(_ runTag: UInt64) {
        let continuation = self.state.withLock { state in
            state.deadlines[runTag] = nil
            return state.runs.removeValue(forKey: runTag)
        }
        continuation?.finish()
        self.applyDeadline()
    }

    /// Sends `input` to every run (a clock tick, a reset).
    func broadcast(_ input: SlotInput) {
        for continuation in self.state.withLock({ Array($0.runs.values) }) { continuation.yield(input) }
    }

    /// Sets the lease deadline of the run tagged `runTag`; the channel writes until the earliest of them.
    func setDeadline(_ deadline: ContinuousClock.Instant, for runTag: UInt64) {
        self.state.withLock { $0.deadlines[runTag] = deadline }
        self.applyDeadline()
    }

    /// Whether ``halt()`` was called: the channel writes nothing more and must be replaced.
    var isHalted: Bool { self.state.withLock { $0.halted } }

    /// Stops all writing for good: the slot is giving its channel up.
    ///
    /// The deadline is handed to the channel under the lock, here and in `applyDeadline`: the
    /// channel applies them in the order they were given, so a later deadline computed before the
    /// halt can never land after it and let a halted channel write again.
    func halt() {
        self.state.withLock { state in
            state.halted = true
            self.channel.setWriteDeadline(ContinuousClock.now)
        }
    }

    private func applyDeadline() {
        self.state.withLock { state in
            guard !state.halted else { return }
            // No run holds a lease: nothing may be written until one does.
            self.channel.setWriteDeadline(state.deadlines.values.min() ?? ContinuousClock.now)
        }
    }

    /// Repeats the channel made since the last call. Runs of a slot all belong to one campaign, so
    /// whichever run checkpoints next reports them. `fresh` reads the channel now (a run's last
    /// checkpoint must include everything); otherwise the background reading is used.
    func takeRepeats(fresh: Bool) async -> (resent: Int, retried: Int) {
        if fresh { await self.refreshRepeats() }
        return self.state.withLock { state in
            let total = state.totals
            let taken = (max(0, total.resent - state.reportedResent), max(0, total.retried - state.reportedRetried))
            state.reportedResent = max(state.reportedResent, total.resent)
            state.reportedRetried = max(state.reportedRetried, total.retried)
            return taken
        }
    }

    /// Gives back repeats taken for a checkpoint that was never confirmed, so another run reports them.
    func returnRepeats(_ repeats: (resent: Int, retried: Int)) {
        self.state.withLock { state in
            state.reportedResent -= repeats.resent
            state.reportedRetried -= repeats.retried
        }
    }
}
