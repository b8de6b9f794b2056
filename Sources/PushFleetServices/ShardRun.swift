import CoreMetrics
import Logging
import PushFleetCore
import PushFleetRedis
import Synchronization

/// One shard, worked by a slot: feeds windows of tokens to the slot's channel and carries out what
/// its ``StateMachine`` decides (checkpoints, the write deadline, completion, release). Everything
/// it decides is in the machine; this type only does the I/O.
struct ShardRun {
    enum Ending: Hashable { case completed, released, leaseLost, abandoned }

    let environment: ShardRunEnvironment
    let lease: ShardLease
    let template: CampaignTemplate
    let slot: SlotContext
    /// High bits of every tag of this run (see ``SlotContext/runTagMask``).
    let runTag: UInt64
    let drain: DrainSignal
    /// Called once, when every token was handed to the channel or feeding stopped.
    let onFeedEnded: @Sendable () -> Void
    private var machine: StateMachine
    /// The end of what the feeder read, raised before it tells the machine (a ``SlotInput/handing(upTo:)``
    /// may still be queued when the run ends): what the run may have written.
    private let readMark: ReadMark

    init(
        environment: ShardRunEnvironment, lease: ShardLease, leasedAt: ContinuousClock.Instant, template: CampaignTemplate, slot: SlotContext,
        runTag: UInt64, drain: DrainSignal, onFeedEnded: @escaping @Sendable () -> Void
    ) {
        self.environment = environment
        self.lease = lease
        self.template = template
        self.slot = slot
        self.runTag = runTag
        self.drain = drain
        self.onFeedEnded = onFeedEnded
        self.machine = StateMachine(lease: lease, runTag: runTag, configuration: environment.configuration, leasedAt: leasedAt)
        self.readMark = ReadMark(lease.cursor)
    }

    private var logger: Logger { self.environment.logger }

    /// Works the shard until it is completed, released or lost.
    mutating func execute(inputs: AsyncStream<SlotInput>, continuation: AsyncStream<SlotInput>.Continuation) async -> Ending {
        // However the run ends, the worker keeps it until Postgres holds it (see ``EndedRuns``).
        defer { self.environment.endedRuns.record(self.lease, reached: self.readMark.value) }
        let stop = StopFlag()
        if let ending = await self.perform(self.machine.start(now: .now), stop: stop) { return ending }
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
            let now = ContinuousClock.now
            if !self.machine.isStopping && self.drain.isTriggered {
                if let ending = await self.perform(self.machine.drainRequested(now: now), stop: stop) { return ending }
            }
            let action: StateMachine.Action
            switch input {
            case .outcomes(let outcomes): action = self.machine.outcomes(outcomes, now: now)
            case .handing(let upTo): action = self.machine.handing(upTo: upTo, now: now)
            case .fed(let upTo): action = self.machine.fed(upTo: upTo, now: now)
            case .feedEnded: action = self.machine.feedEnded(now: now)
            case .tick: action = self.machine.tick(now: now)
            case .channelReset: action = self.machine.channelReset(now: now)
            case .leaseLost:
                self.logger.warning("lease lost on read; dropping the shard", metadata: self.metadata)
                action = self.machine.leaseLost()
            }
            if let ending = await self.perform(action, stop: stop) { return ending }
        }
        return .abandoned
    }

    /// Carries out `action` and the actions that follow from it; returns how the run ended, if it did.
    private mutating func perform(_ action: StateMachine.Action, stop: StopFlag) async -> Ending? {
        var action = action
        while true {
            switch action {
            case .none:
                return nil
            case .stopFeeding:
                stop.set()
                action = self.machine.feedingStopped(now: .now)
            case .withdraw:
                let tags = await self.slot.channel.withdraw(runTag: self.runTag)
                action = self.machine.withdrawn(tags, now: .now)
            case .pauseCampaign(let request):
                let reason = request.reason + (self.environment.configuration.credentials.map { " for \($0)" } ?? "")
                self.logger.error(
                    request.isOutage ? "APNs is failing: pausing the campaign until it recovers" : "APNs refused the provider, not the token: pausing the campaign",
                    metadata: self.metadata.merging(["reason": "\(reason)"]) { $1 }
                )
                do {
                    _ = try await self.environment.queue.requestPause(campaign: self.lease.campaign, reason: reason, outage: request.isOutage)
                } catch {
                    // The run stops anyway; the next run to meet the same answer asks again.
                    self.logger.warning("cannot pause the campaign", metadata: self.metadata.merging(["error": "\(error)"]) { $1 })
                }
                action = self.machine.pauseRequested(now: .now)
            case .haltChannel:
                self.slot.halt()
                action = self.machine.channelHalted(now: .now)
            case .extendWriteDeadline(let until):
                self.slot.setDeadline(until, for: self.runTag)
                action = self.machine.writeDeadlineExtended(now: .now)
            case .collectRepeats(let fresh):
                let repeats = await self.slot.takeRepeats(fresh: fresh)
                action = self.machine.repeatsCollected(.init(resent: repeats.resent, retried: repeats.retried), now: .now)
            case .checkpoint(let delta):
                do {
                    let started = ContinuousClock.now
                    let result = try await self.environment.queue.checkpoint(
                        self.lease, delta, leaseMilliseconds: self.environment.configuration.leaseMilliseconds
                    )
                    FleetMetrics.shared.checkpointDuration.record(ContinuousClock.now - started)
                    switch result {
                    case .ok(let status):
                        action = self.machine.checkpointConfirmed(status, now: .now)
                    case .leaseLost:
                        self.logger.warning("lease lost at checkpoint; dropping the shard", metadata: self.metadata)
                        action = self.machine.checkpointRefused()
                    }
                } catch {
                    // Redis unreachable: the machine keeps the checkpoint and sends it again; the
                    // write deadline is not renewed, so sending stops when the lease may have run out.
                    FleetMetrics.shared.checkpointFailures.increment()
                    self.logger.warning("checkpoint failed; will retry", metadata: self.metadata.merging(["error": "\(error)"]) { $1 })
                    action = self.machine.checkpointFailed(now: .now)
                }
            case .complete:
                if (try? await self.environment.queue.complete(self.lease)) != true {
                    self.logger.warning("lease lost at completion", metadata: self.metadata)
                }
                return .completed
            case .release(let cursor, let delivered, let ending):
                _ = try? await self.environment.queue.release(self.lease, cursor: cursor, delivered: delivered, countAttempt: false)
                return ending
            case .end(let ending, let giveBack):
                if ending == .abandoned {
                    self.logger.warning("no checkpoint for a whole lease; dropping the shard", metadata: self.metadata)
                }
                self.slot.returnRepeats((giveBack.resent, giveBack.retried))
                return ending
            }
        }
    }

    private func startFeeder(stop stopFlag: StopFlag, continuation: AsyncStream<SlotInput>.Continuation) -> Task<Void, Never> {
        let queue = self.environment.queue
        let lease = self.lease
        let channel = self.slot.channel
        let runTag = self.runTag
        let window = self.environment.configuration.readWindow
        let template = self.template
        let logger = self.logger
        let onFeedEnded = self.onFeedEnded
        let readMark = self.readMark
        let paced = self.environment.paced
        return Task {
            var next = lease.cursor
            defer {
                continuation.yield(.feedEnded)
                onFeedEnded()
            }
            while next < lease.tokenCount, !stopFlag.isSet, !Task.isCancelled {
                do {
                    guard
                        let read = try await queue.read(
                            lease, from: next, count: min(window, lease.tokenCount - next), clock: nil, personalized: template.personalization != nil
                        )
                    else {
                        continuation.yield(.leaseLost)
                        return
                    }
                    if let wait = read.retryAfter {
                        // A throttled campaign: the fleet's bucket refills.
                        paced.paced(lease.campaign)
                        try? await Task.sleep(for: wait)
                        continue
                    }
                    let tokens = read.tokens
                    if tokens.isEmpty { return }
                    readMark.raise(to: next + tokens.count)
                    continuation.yield(.handing(upTo: next + tokens.count))
                    // An earlier holder's deliveries are settled by the machine, never sent again.
                    // `next` moves past each run once it is handed over, so a failed send retries
                    // only what was not.
                    let window = next..<next + tokens.count
                    for run in Self.unsent(window, skipping: lease.delivered) {
                        if run == window {
                            try await channel.send(tokens, values: read.values, firstTag: runTag | UInt64(next), template: template)
                        } else {
                            let slice = (run.lowerBound - window.lowerBound)..<(run.upperBound - window.lowerBound)
                            try await channel.send(
                                Array(tokens[slice]), values: read.values.map { Array($0[slice]) }, firstTag: runTag | UInt64(run.lowerBound),
                                template: template
                            )
                        }
                        next = run.upperBound
                    }
                    next = window.upperBound
                    continuation.yield(.fed(upTo: next))
                } catch {
                    logger.warning("cannot feed the shard", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
    }

    /// The runs of `window` that hold no position of `delivered` (ascending), in order.
    static func unsent(_ window: Range<Int>, skipping delivered: [Int]) -> [Range<Int>] {
        var runs: [Range<Int>] = []
        var start = window.lowerBound
        for position in delivered where window.contains(position) {
            if position > start { runs.append(start..<position) }
            start = position + 1
        }
        if start < window.upperBound { runs.append(start..<window.upperBound) }
        return runs
    }

    private var metadata: Logger.Metadata {
        ["campaign": "\(self.lease.campaign)", "shard": "\(self.lease.shard)", "fence": "\(self.lease.fence)"]
    }
}

/// The end of the positions a feeder read from Redis (and so may have written).
final class ReadMark: Sendable {
    private let mark: Atomic<Int>
    init(_ start: Int) { self.mark = Atomic(start) }
    func raise(to end: Int) { self.mark.store(end, ordering: .releasing) }
    var value: Int { self.mark.load(ordering: .acquiring) }
}

/// Tells a feeder to stop after the window it is sending.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { self.value.store(true, ordering: .releasing) }
    var isSet: Bool { self.value.load(ordering: .acquiring) }
}
