import APNSTransport
import APNSWire
import Foundation
import Logging
import NIOCore
import PushFleetCore
import PushFleetRedis
import Synchronization

/// One shard, worked by one slot: feed windows of tokens to the sender, collect outcomes, and
/// checkpoint the low-water mark (the first index without an outcome) with fenced scripts.
struct ShardRun {
    enum Ending { case completed, released, leaseLost, abandoned }

    let worker: WorkerService
    let lease: ShardLease
    let descriptor: CampaignDescriptor
    let payload: Payload
    let sender: BinarySender
    /// High bits of every tag of this run, so stale outcomes of an earlier run are recognised.
    let run: UInt64
    let drain: DrainSignal

    private var settled: [Bool] = []
    private var lowWater = 0
    private var fedUpTo = 0
    private var feedEnded = false
    private var acceptedSinceCheckpoint = 0
    private var rejectionsSinceCheckpoint: [Rejection] = []
    private var lastCheckpoint = ContinuousClock.now
    /// When the last checkpoint that Redis confirmed was sent: the lease runs from there.
    private var lastConfirmedCheckpoint = ContinuousClock.now
    private var resentReported = 0
    private var stopping: ContinuousClock.Instant? = nil

    init(worker: WorkerService, lease: ShardLease, descriptor: CampaignDescriptor, payload: Payload, sender: BinarySender, run: UInt64, drain: DrainSignal) {
        self.worker = worker
        self.lease = lease
        self.descriptor = descriptor
        self.payload = payload
        self.sender = sender
        self.run = run
        self.drain = drain
        self.lowWater = lease.cursor
        self.fedUpTo = lease.cursor
        self.settled = Array(repeating: false, count: max(0, lease.tokenCount - lease.cursor))
    }

    private var configuration: WorkerService.Configuration { self.worker.configuration }
    private var logger: Logger { self.worker.logger }

    mutating func execute(inputs: inout AsyncStream<SlotInput>.Iterator, continuation: AsyncStream<SlotInput>.Continuation) async -> Ending {
        let stop = StopFlag()
        self.resentReported = await self.sender.statistics().framesResentAfterSilentClose
        self.renewWriteDeadline(from: .now)
        let feeder = self.startFeeder(stop: stop, continuation: continuation)
        defer { feeder.cancel() }
        while let input = await inputs.next() {
            switch input {
            case .outcome(.accepted(let batch)):
                for notification in batch { if self.settle(tag: notification.tag) { self.acceptedSinceCheckpoint += 1 } }
            case .outcome(.rejected(let notification, let status)):
                if self.settle(tag: notification.tag) {
                    self.rejectionsSinceCheckpoint.append(Rejection(token: notification.token, reason: status.name, timestampMilliseconds: nil))
                }
            case .fed(let run, let upTo) where run == self.run:
                self.fedUpTo = upTo
            case .feedEnded(let run) where run == self.run:
                self.feedEnded = true
            case .leaseLost(let run) where run == self.run:
                self.logger.warning("lease lost on read; dropping the shard", metadata: self.metadata)
                return .leaseLost
            case .tick, .fed, .feedEnded, .leaseLost:
                break
            }
            if self.stopping == nil && self.drain.isTriggered { self.beginStopping(stop) }

            let unsaved = self.acceptedSinceCheckpoint + self.rejectionsSinceCheckpoint.count
            let due = unsaved >= self.configuration.checkpointEvery || ContinuousClock.now - self.lastCheckpoint >= self.configuration.checkpointInterval
            let finished = self.lowWater == self.lease.tokenCount
            let drained = self.stopping != nil && self.feedEnded && self.lowWater == self.fedUpTo
            let outOfTime = self.stopping.map { ContinuousClock.now - $0 >= self.configuration.drainTimeout } ?? false
            var saved = false
            if due || finished || drained || outOfTime {
                switch await self.checkpoint() {
                case .leaseLost:
                    self.logger.warning("lease lost at checkpoint; dropping the shard", metadata: self.metadata)
                    return .leaseLost
                case .failed:
                    // Redis did not answer. Past the lease by our own clock, another worker may own
                    // the shard already: stop, and leave the shard to the lease's expiry.
                    if ContinuousClock.now - self.lastConfirmedCheckpoint >= .milliseconds(self.configuration.leaseMilliseconds) {
                        self.logger.warning("no checkpoint for a whole lease; dropping the shard", metadata: self.metadata)
                        return .leaseLost
                    }
                case .ok(let status):
                    saved = true
                    if status != .running && self.stopping == nil { self.beginStopping(stop) }
                }
            }
            // Complete or release only right after a checkpoint that saved every outcome.
            guard saved else { continue }
            if finished {
                if (try? await self.worker.queue.complete(self.lease)) != true {
                    self.logger.warning("lease lost at completion", metadata: self.metadata)
                }
                return .completed
            }
            if drained {
                _ = try? await self.worker.queue.release(self.lease, cursor: self.lowWater, countAttempt: false)
                return .released
            }
            if outOfTime {
                // Outcomes of [lowWater, fedUpTo) never came: stop the sender before anyone else can
                // claim the shard, count those as re-sends, then release.
                self.sender.setWriteDeadline(.now())
                if case .ok = await self.checkpoint(extraResent: self.fedUpTo - self.lowWater) {
                    _ = try? await self.worker.queue.release(self.lease, cursor: self.lowWater, countAttempt: false)
                }
                return .abandoned
            }
        }
        return .abandoned
    }

    /// Records the outcome of the notification tagged `tag`; false if it is not this run's or known.
    private mutating func settle(tag: UInt64) -> Bool {
        guard tag & 0xFFFF_FFFF_0000_0000 == self.run else { return false }
        let index = Int(tag & 0xFFFF_FFFF) - self.lease.cursor
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

    private mutating func checkpoint(extraResent: Int = 0) async -> CheckpointOutcome {
        let statistics = await self.sender.statistics()
        let resent = statistics.framesResentAfterSilentClose - self.resentReported + extraResent
        let sentAt = ContinuousClock.now
        do {
            let result = try await self.worker.queue.checkpoint(
                self.lease, cursor: self.lowWater, accepted: self.acceptedSinceCheckpoint, rejections: self.rejectionsSinceCheckpoint,
                resent: resent, leaseMilliseconds: self.configuration.leaseMilliseconds
            )
            self.lastCheckpoint = sentAt
            switch result {
            case .leaseLost:
                return .leaseLost
            case .ok(let status):
                self.acceptedSinceCheckpoint = 0
                self.rejectionsSinceCheckpoint.removeAll()
                self.resentReported = statistics.framesResentAfterSilentClose
                self.lastConfirmedCheckpoint = sentAt
                self.renewWriteDeadline(from: sentAt)
                return .ok(status)
            }
        } catch {
            // Redis unreachable: keep the outcomes and try again at the next tick. The write
            // deadline is not renewed, so sending stops when the lease may have run out.
            self.lastCheckpoint = sentAt
            self.logger.warning("checkpoint failed; will retry", metadata: ["error": "\(error)"])
            return .failed
        }
    }

    /// Lets the sender write until the lease, renewed at `instant`, may have run out by our clock,
    /// less a margin for the checkpoint's own round trip.
    private func renewWriteDeadline(from instant: ContinuousClock.Instant) {
        let lease = Duration.milliseconds(self.configuration.leaseMilliseconds)
        let margin = min(lease / 3, .seconds(5))
        let left = (instant + lease - margin) - ContinuousClock.now
        self.sender.setWriteDeadline(.now() + .nanoseconds(Int64(left.components.seconds) * 1_000_000_000 + left.components.attoseconds / 1_000_000_000))
    }

    private func startFeeder(stop stopFlag: StopFlag, continuation: AsyncStream<SlotInput>.Continuation) -> Task<Void, Never> {
        let queue = self.worker.queue
        let lease = self.lease
        let sender = self.sender
        let run = self.run
        let window = self.configuration.readWindow
        let payload = self.payload
        let descriptor = self.descriptor
        let logger = self.logger
        return Task {
            var next = lease.cursor
            defer { continuation.yield(.feedEnded(run: run)) }
            while next < lease.tokenCount, !stopFlag.isSet, !Task.isCancelled {
                do {
                    guard let tokens = try await queue.read(lease, from: next, count: min(window, lease.tokenCount - next)) else {
                        continuation.yield(.leaseLost(run: run))
                        return
                    }
                    if tokens.isEmpty { return }
                    let notifications = tokens.enumerated().map { offset, token in
                        BinaryNotification(
                            token: token, payload: payload, expiration: UInt32(clamping: descriptor.expiration),
                            priority: UInt8(clamping: descriptor.priority), tag: run | UInt64(next + offset)
                        )
                    }
                    try await sender.send(notifications)
                    next += tokens.count
                    continuation.yield(.fed(run: run, upTo: next))
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
    func clear() { self.value.store(false, ordering: .releasing) }
    var isSet: Bool { self.value.load(ordering: .acquiring) }
}
