import Logging
import NIOCore
import PushFleetCore
import PushFleetRedis
import Synchronization

/// One shard, worked by a slot: feed windows of tokens to the slot's channel, collect outcomes, and
/// checkpoint the low-water mark (the first index without an outcome) with fenced scripts.
struct ShardRun {
    enum Ending { case completed, released, leaseLost, abandoned }

    let worker: WorkerService
    let lease: ShardLease
    let template: CampaignTemplate
    let slot: SlotContext
    /// High bits of every tag of this run (see ``SlotContext/runMask``).
    let run: UInt64
    let drain: DrainSignal
    /// Called once, when every token was handed to the channel or feeding stopped.
    let onFeedEnded: @Sendable () -> Void

    private var settled: [Bool] = []
    private var lowWater = 0
    private var fedUpTo = 0
    /// Tokens up to here may have been written (the feeder says so before `send`).
    private var handedUpTo = 0
    private var feedEnded = false
    private var accepted = 0
    private var rejections: [Rejection] = []
    /// A checkpoint sent without an answer; it is sent again, unchanged, before anything new.
    private var unanswered: CheckpointDelta? = nil
    /// The channel's repeats taken into ``unanswered``; given back to the slot if it is never confirmed.
    private var unansweredRepeats = (resent: 0, retried: 0)
    private var sequence = 0
    private var lastCheckpoint = ContinuousClock.now
    /// When the last checkpoint that Redis confirmed was sent: the lease runs from there.
    private var lastConfirmedCheckpoint = ContinuousClock.now
    private var stopping: ContinuousClock.Instant? = nil
    private var reset = false

    init(
        worker: WorkerService, lease: ShardLease, template: CampaignTemplate, slot: SlotContext, run: UInt64, drain: DrainSignal,
        onFeedEnded: @escaping @Sendable () -> Void
    ) {
        self.worker = worker
        self.lease = lease
        self.template = template
        self.slot = slot
        self.run = run
        self.drain = drain
        self.onFeedEnded = onFeedEnded
        self.lowWater = lease.cursor
        self.fedUpTo = lease.cursor
        self.handedUpTo = lease.cursor
        self.settled = Array(repeating: false, count: max(0, lease.tokenCount - lease.cursor))
    }

    private var configuration: WorkerService.Configuration { self.worker.configuration }
    private var logger: Logger { self.worker.logger }

    /// Works the shard until it is completed, released or lost.
    mutating func execute(inputs: AsyncStream<SlotInput>, continuation: AsyncStream<SlotInput>.Continuation) async -> Ending {
        let stop = StopFlag()
        self.renewWriteDeadline(from: .now)
        let feeder = self.startFeeder(stop: stop, continuation: continuation)
        let ticker = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                continuation.yield(.tick)
            }
        }
        defer {
            feeder.cancel()
            ticker.cancel()
        }
        for await input in inputs {
            switch input {
            case .outcomes(let outcomes):
                for outcome in outcomes {
                    switch outcome {
                    case .accepted(let tag):
                        if self.settle(tag: tag) { self.accepted += 1 }
                    case .rejected(let tag, let rejection):
                        if self.settle(tag: tag) { self.rejections.append(rejection) }
                    }
                }
            case .handing(let upTo):
                self.handedUpTo = max(self.handedUpTo, upTo)
            case .fed(let upTo):
                self.fedUpTo = upTo
            case .feedEnded:
                self.feedEnded = true
            case .leaseLost:
                self.logger.warning("lease lost on read; dropping the shard", metadata: self.metadata)
                self.giveBackRepeats()
                return .leaseLost
            case .channelReset:
                self.reset = true
                if self.stopping == nil { self.beginStopping(stop) }
            case .tick:
                break
            }
            if self.stopping == nil && self.drain.isTriggered { self.beginStopping(stop) }

            let unsaved = self.accepted + self.rejections.count
            let due = unsaved >= self.configuration.checkpointEvery || ContinuousClock.now - self.lastCheckpoint >= self.configuration.checkpointInterval
            let finished = self.lowWater == self.lease.tokenCount
            let drained = self.stopping != nil && self.feedEnded && self.lowWater == self.fedUpTo
            let outOfTime = self.reset || (self.stopping.map { ContinuousClock.now - $0 >= self.configuration.drainTimeout } ?? false)
            guard due || finished || drained || outOfTime else { continue }
            let givingUp = outOfTime && !drained
            if givingUp {
                // Outcomes of [lowWater, handedUpTo) never came: stop writing before anyone else can
                // claim the shard, count those as re-sends, then release.
                self.slot.halt()
            }
            switch await self.checkpoint(extraResent: givingUp ? max(0, self.handedUpTo - self.lowWater) : 0, final: finished || drained || givingUp) {
            case .leaseLost:
                self.logger.warning("lease lost at checkpoint; dropping the shard", metadata: self.metadata)
                self.giveBackRepeats()
                return .leaseLost
            case .failed:
                // Redis did not answer. Past the lease by our own clock, another worker may own
                // the shard already: stop, and leave the shard to the lease's expiry.
                if givingUp || ContinuousClock.now - self.lastConfirmedCheckpoint >= .milliseconds(self.configuration.leaseMilliseconds) {
                    self.logger.warning("no checkpoint for a whole lease; dropping the shard", metadata: self.metadata)
                    self.giveBackRepeats()
                    return .abandoned
                }
                continue
            case .ok(let status):
                if status != .running && self.stopping == nil { self.beginStopping(stop) }
            }
            // Here every outcome so far is saved: complete or release now if the run is over.
            if finished {
                if (try? await self.worker.queue.complete(self.lease)) != true {
                    self.logger.warning("lease lost at completion", metadata: self.metadata)
                }
                return .completed
            }
            if drained || givingUp {
                _ = try? await self.worker.queue.release(self.lease, cursor: self.lowWater, countAttempt: false)
                return drained ? .released : .abandoned
            }
        }
        return .abandoned
    }

    /// Records the outcome of the notification tagged `tag`; false if it is not this run's or known.
    private mutating func settle(tag: UInt64) -> Bool {
        guard tag & SlotContext.runMask == self.run else { return false }
        let index = Int(tag & ~SlotContext.runMask) - self.lease.cursor
        guard index >= 0, index < self.settled.count, !self.settled[index] else { return false }
        self.settled[index] = true
        while self.lowWater - self.lease.cursor < self.settled.count, self.settled[self.lowWater - self.lease.cursor] {
            self.lowWater += 1
        }
        return true
    }

    private mutating func beginStopping(_ stop: StopFlag) {
        self.stopping = .now
        stop.set()
    }

    enum CheckpointOutcome { case ok(CampaignQueueStatus), leaseLost, failed }

    /// Saves every outcome collected so far. A checkpoint Redis did not answer is sent again,
    /// unchanged (same sequence number, applied once), before the outcomes that came after it.
    private mutating func checkpoint(extraResent: Int = 0, final: Bool = false) async -> CheckpointOutcome {
        var extraResent = extraResent
        var status = CampaignQueueStatus.running
        repeat {
            if self.unanswered == nil {
                let repeats = await self.slot.takeRepeats(fresh: final)
                self.unansweredRepeats = repeats
                self.sequence += 1
                self.unanswered = CheckpointDelta(
                    sequence: self.sequence, cursor: self.lowWater, accepted: self.accepted, rejections: self.rejections,
                    resent: repeats.resent + extraResent, retried: repeats.retried
                )
                self.accepted = 0
                self.rejections.removeAll()
                extraResent = 0
            }
            let sentAt = ContinuousClock.now
            self.lastCheckpoint = sentAt
            do {
                switch try await self.worker.queue.checkpoint(self.lease, self.unanswered!, leaseMilliseconds: self.configuration.leaseMilliseconds) {
                case .leaseLost:
                    return .leaseLost
                case .ok(let answer):
                    status = answer
                    self.unanswered = nil
                    self.lastConfirmedCheckpoint = sentAt
                    self.renewWriteDeadline(from: sentAt)
                }
            } catch {
                // Redis unreachable: keep the checkpoint and send it again at the next tick. The
                // write deadline is not renewed, so sending stops when the lease may have run out.
                self.logger.warning("checkpoint failed; will retry", metadata: ["error": "\(error)"])
                return .failed
            }
            // Outcomes may have been held back behind an unanswered checkpoint, or a cursor moved.
        } while self.accepted + self.rejections.count + extraResent > 0 || self.unanswered != nil
        return .ok(status)
    }

    /// Gives the channel's repeats of a checkpoint that was never confirmed back to the slot.
    private mutating func giveBackRepeats() {
        guard self.unanswered != nil else { return }
        self.slot.returnRepeats(self.unansweredRepeats)
        self.unanswered = nil
    }

    /// Lets the channel write until the lease, renewed at `instant`, may have run out by our clock,
    /// less a margin for the checkpoint's own round trip.
    private func renewWriteDeadline(from instant: ContinuousClock.Instant) {
        let lease = Duration.milliseconds(self.configuration.leaseMilliseconds)
        let margin = min(lease / 3, .seconds(5))
        let left = (instant + lease - margin) - ContinuousClock.now
        let nanoseconds = Int64(left.components.seconds) * 1_000_000_000 + left.components.attoseconds / 1_000_000_000
        self.slot.setDeadline(.now() + .nanoseconds(nanoseconds), for: self.run)
    }

    private func startFeeder(stop stopFlag: StopFlag, continuation: AsyncStream<SlotInput>.Continuation) -> Task<Void, Never> {
        let queue = self.worker.queue
        let lease = self.lease
        let channel = self.slot.channel
        let run = self.run
        let window = self.configuration.readWindow
        let template = self.template
        let logger = self.logger
        let onFeedEnded = self.onFeedEnded
        return Task {
            var next = lease.cursor
            defer {
                continuation.yield(.feedEnded)
                onFeedEnded()
            }
            while next < lease.tokenCount, !stopFlag.isSet, !Task.isCancelled {
                do {
                    guard let tokens = try await queue.read(lease, from: next, count: min(window, lease.tokenCount - next)) else {
                        continuation.yield(.leaseLost)
                        return
                    }
                    if tokens.isEmpty { return }
                    continuation.yield(.handing(upTo: next + tokens.count))
                    try await channel.send(tokens, firstTag: run | UInt64(next), template: template)
                    next += tokens.count
                    continuation.yield(.fed(upTo: next))
                } catch {
                    logger.warning("cannot feed the shard", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
    }

    private var metadata: Logger.Metadata {
        ["campaign": "\(self.lease.campaign)", "shard": "\(self.lease.shard)", "fence": "\(self.lease.fence)"]
    }
}

/// Tells a feeder to stop after the window it is sending.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { self.value.store(true, ordering: .releasing) }
    var isSet: Bool { self.value.load(ordering: .acquiring) }
}
