import PushFleetCore
import PushFleetRedis

extension ShardRun {
    /// The bookkeeping of one shard run, without I/O: what was handed to the channel, which
    /// outcomes came back, what was checkpointed, and when to stop. Every input returns the one
    /// action its driver (``ShardRun``) must carry out next; an action that has a sequel names the
    /// input that reports it done (``Action/checkpoint(_:)`` → ``checkpointConfirmed(_:now:)`` and its
    /// siblings), so a test can play a whole run as a transcript. The caller passes the time in.
    ///
    /// **Each outcome is counted once, whoever holds the shard.** Answers come back out of order
    /// (pooled connections, retries, 500s and 503s), so the run keeps every outcome *above* the
    /// low-water mark (the first position without an outcome) to itself and checkpoints only what
    /// lies below it. A checkpoint's counts are therefore exactly the outcomes of
    /// `[previous cursor, cursor)`, and the shard's counted outcomes are exactly its positions below
    /// the stored cursor. A worker that resumes the shard at that cursor, after a crash, a freeze
    /// or a release, counts the positions above it anew, and none of them was counted before:
    /// `accepted + rejected` can never exceed the shard's size. The price is that an outcome above
    /// a slow answer waits to be counted until that answer arrives.
    ///
    /// **What was delivered is not sent again.** A run that gives its shard back alive (a pause, a
    /// drain, a reset channel) leaves the positions above its mark APNs accepted with the release
    /// (``Action/release(cursor:delivered:ending:)``); the next run takes them from its lease and,
    /// as its feeder passes them, settles them as accepted without sending them: counted once, by
    /// the run whose mark passes them, and delivered once.
    ///
    /// **A provider-level answer is no outcome.** A position APNs refused for the provider's sake
    /// (a wrong team id, a topic the certificate does not cover, an outage that outlasted the
    /// retries) is *deferred*: the mark never passes it, the run asks once for the campaign to be
    /// paused with the reason, stops feeding, and releases the shard at the mark when every other
    /// answer is in. After `campaign resume` the shard is sent from there.
    struct StateMachine {
        struct Repeats: Hashable, Sendable {
            var resent = 0
            var retried = 0
        }

        enum Action: Hashable {
            /// Nothing to do until the next input.
            case none
            /// Tell the feeder to stop after the window it is handing over; then ``feedingStopped(now:)``.
            case stopFeeding
            /// Take back from the channel what the run handed over and was never written; then
            /// ``withdrawn(_:now:)`` with their tags.
            case withdraw
            /// Pause the campaign for everyone, with this reason (a provider-level rejection); then
            /// ``pauseRequested(now:)``.
            case pauseCampaign(PauseRequest)
            /// Stop the channel from writing anything more (the run is giving the shard up before
            /// its outcomes came); then ``channelHalted(now:)``.
            case haltChannel
            /// Let the channel write until `until` (the lease, less a margin, by our clock); then
            /// ``writeDeadlineExtended(now:)``.
            case extendWriteDeadline(until: ContinuousClock.Instant)
            /// Read the channel's repeats not yet reported (afresh when `fresh`: the run's last
            /// checkpoint must hold them all); then ``repeatsCollected(_:now:)``.
            case collectRepeats(fresh: Bool)
            /// Send this checkpoint; then ``checkpointConfirmed(_:now:)``, ``checkpointRefused()`` or
            /// ``checkpointFailed(now:)``.
            case checkpoint(CheckpointDelta)
            /// Every outcome is saved and the shard is done: complete it. The run ends.
            case complete
            /// Every outcome below `cursor` is saved: give the shard back at `cursor`, with the
            /// positions past it APNs accepted (ascending; not counted yet, and not to be sent
            /// again). The run ends as `ending`.
            case release(cursor: Int, delivered: [Int], ending: Ending)
            /// Drop the shard without a word to Redis, giving back the repeats an unconfirmed
            /// checkpoint had taken. The run ends as `ending`.
            case end(Ending, giveBack: Repeats)
        }

        private enum Phase: Hashable {
            case running
            /// A checkpoint is being prepared or sent; `closing` is how the run ends once it is
            /// saved, if it ends.
            case checkpointing(closing: Ending?)
            case ended
        }

        let configuration: WorkerService.Configuration
        /// The tag bits of this run.
        let runTag: UInt64
        /// The cursor the run started at.
        let start: Int
        let tokenCount: Int

        private enum Answer: UInt8 {
            /// No answer yet: unwritten, or written and waiting.
            case none
            /// Its outcome came: an acceptance, or a rejection counted as it came (at the mark).
            case settled
            /// Its outcome came above the mark: a rejection, held until the mark passes it.
            case settledRejection
            /// The same, for want of an answer to its every attempt (``DeliveryOutcome/unanswered(tag:token:_:othersAnswered:)``):
            /// APNs may have delivered it.
            case settledUnanswered
            /// Refused for the provider's sake: unsent, sent again after the resume.
            case deferred
            /// Taken back from the channel unwritten: the next holder sends it.
            case withdrawn
        }

        private var phase = Phase.running
        /// Per position from ``start``: whether its outcome came, or a provider-level refusal.
        private var answers: [Answer]
        /// Positions with an answer of either kind.
        private var answered = 0
        /// The first provider-level reason, and whether the pause is still to be asked for.
        private(set) var deferredReason: PauseRequest? = nil
        private var pauseToRequest = false
        /// Rejections of positions above the low-water mark, held until the mark passes them.
        /// Answers come nearly in order: a rejection above every one held is appended here, in
        /// position order from ``heldStart`` on, and the mark takes it from the front without a
        /// hashed lookup; one that comes after a higher one goes to ``lateRejections``.
        private var heldRejections: [(position: Int, rejection: Rejection)] = []
        private var heldStart = 0
        private var lateRejections: [Int: Rejection] = [:]
        /// Positions an earlier holder left as delivered (the lease's), ascending; those from
        /// ``nextCarried`` on are not handed over yet.
        private let carried: [Int]
        private var nextCarried = 0
        /// The first position without an outcome.
        private(set) var lowWater: Int
        /// Outcomes in `[cursor of the last checkpoint built, lowWater)`: the next checkpoint's counts.
        private var unsavedAccepted = 0
        private var unsavedRejections: [Rejection] = []
        /// Positions below this may have been written (the feeder says so before it sends).
        private var handedUpTo: Int
        private var feedEnded = false
        /// Positions handed over without an outcome when the run gave up: reported as re-sent.
        private var extraResent = 0
        /// ``extraResent`` was set for the run's end (it is set once, whatever is retried).
        private var tailCounted = false
        /// A checkpoint sent without an answer: sent again, unchanged, before anything new.
        private var unanswered: CheckpointDelta? = nil
        private var unansweredRepeats = Repeats()
        private var sequence = 0
        private var lastCheckpoint: ContinuousClock.Instant
        private var checkpointSentAt: ContinuousClock.Instant
        /// When the last checkpoint Redis confirmed was sent: the lease runs from there.
        private var lastConfirmed: ContinuousClock.Instant
        private var stopRequested = false
        private var withdrawRequested = false
        private var stopping: ContinuousClock.Instant? = nil
        private var channelWasReset = false
        private var channelHalted = false

        /// - Parameter leasedAt: When the claim that granted `lease` was sent, by our clock: Redis
        ///   started the lease after that, so a lease timed from there ends no later than Redis' own.
        init(lease: ShardLease, runTag: UInt64, configuration: WorkerService.Configuration, leasedAt: ContinuousClock.Instant) {
            self.configuration = configuration
            self.runTag = runTag
            self.start = lease.cursor
            self.tokenCount = lease.tokenCount
            self.answers = Array(repeating: .none, count: max(0, lease.tokenCount - lease.cursor))
            self.carried = lease.delivered
            self.lowWater = lease.cursor
            self.handedUpTo = lease.cursor
            self.lastCheckpoint = leasedAt
            self.checkpointSentAt = leasedAt
            self.lastConfirmed = leasedAt
        }

        /// Whether the run was told to stop (a drain, a campaign no longer running, a reset channel).
        var isStopping: Bool { self.stopRequested }

        // MARK: - Inputs

        /// The run begins: sending may go on until the lease granted at `leasedAt` nears its end.
        mutating func start(now: ContinuousClock.Instant) -> Action {
            .extendWriteDeadline(until: self.writeDeadline(leaseFrom: self.lastConfirmed))
        }

        /// Outcomes from the channel; those of other runs, unknown positions and repeats are ignored.
        mutating func outcomes(_ batch: ArraySlice<DeliveryOutcome>, now: ContinuousClock.Instant) -> Action {
            for outcome in batch {
                switch outcome {
                case .accepted(let tag):
                    self.settle(tag: tag, rejection: nil)
                case .rejected(let tag, let rejection):
                    self.settle(tag: tag, rejection: rejection)
                case .refused(let tag, _, let refusal):
                    self.defer(tag: tag, reason: PauseRequest(reason: refusal.description, isOutage: refusal.isOutage))
                }
            }
            return self.next(now: now)
        }

        /// The feeder is about to hand positions below `upTo` to the channel, but for those an
        /// earlier holder delivered (``ShardLease/delivered``): they are settled as accepted here.
        mutating func handing(upTo: Int, now: ContinuousClock.Instant) -> Action {
            self.handedUpTo = max(self.handedUpTo, upTo)
            while self.nextCarried < self.carried.count, self.carried[self.nextCarried] < self.handedUpTo {
                self.settle(tag: self.runTag | UInt64(self.carried[self.nextCarried]), rejection: nil)
                self.nextCarried += 1
            }
            return self.next(now: now)
        }

        /// The feeder handed positions below `upTo` to the channel (``handing(upTo:now:)`` already
        /// counted them): a moment to act, nothing to record.
        mutating func fed(upTo: Int, now: ContinuousClock.Instant) -> Action {
            self.next(now: now)
        }

        /// The feeder stopped: the shard is fully fed, or it was told to stop.
        mutating func feedEnded(now: ContinuousClock.Instant) -> Action {
            self.feedEnded = true
            return self.next(now: now)
        }

        mutating func tick(now: ContinuousClock.Instant) -> Action {
            self.next(now: now)
        }

        /// The worker drains: send nothing new, wait for what is out, save it, release the rest.
        mutating func drainRequested(now: ContinuousClock.Instant) -> Action {
            self.stopRequested = true
            return self.next(now: now)
        }

        /// Another run of the slot lost its lease: the channel is replaced and its unanswered
        /// notifications dropped. Save what came, count what was out as re-sent, release.
        mutating func channelReset(now: ContinuousClock.Instant) -> Action {
            self.channelWasReset = true
            self.stopRequested = true
            return self.next(now: now)
        }

        /// The channel gave back these tags unwritten (after ``Action/withdraw``).
        mutating func withdrawn(_ tags: [UInt64], now: ContinuousClock.Instant) -> Action {
            for tag in tags {
                guard let index = self.unanswered(tag) else { continue }
                self.answers[index] = .withdrawn
                self.answered += 1
            }
            return self.next(now: now)
        }

        /// A fenced read found the lease gone.
        mutating func leaseLost() -> Action {
            self.endWithoutSaving(.leaseLost)
        }

        mutating func feedingStopped(now: ContinuousClock.Instant) -> Action {
            self.next(now: now)
        }

        mutating func pauseRequested(now: ContinuousClock.Instant) -> Action {
            self.next(now: now)
        }

        mutating func channelHalted(now: ContinuousClock.Instant) -> Action {
            guard case .checkpointing(let closing) = self.phase else { return .none }
            return self.prepareCheckpoint(closing: closing, now: now)
        }

        mutating func writeDeadlineExtended(now: ContinuousClock.Instant) -> Action {
            guard case .checkpointing(let closing) = self.phase else { return self.next(now: now) }
            // Everything collected before this checkpoint is saved; more may have been waiting
            // behind an unanswered one.
            if self.unsavedAccepted + self.unsavedRejections.count + self.extraResent > 0 {
                return self.prepareCheckpoint(closing: closing, now: now)
            }
            switch closing {
            case .completed?:
                self.phase = .ended
                return .complete
            case .some(let ending):
                self.phase = .ended
                return .release(cursor: self.lowWater, delivered: self.deliveredAboveMark, ending: ending)
            case nil:
                self.phase = .running
                return self.next(now: now)
            }
        }

        mutating func repeatsCollected(_ repeats: Repeats, now: ContinuousClock.Instant) -> Action {
            guard case .checkpointing = self.phase else { return .none }
            self.sequence += 1
            let delta = CheckpointDelta(
                sequence: self.sequence, cursor: self.lowWater, accepted: self.unsavedAccepted, rejections: self.unsavedRejections,
                resent: repeats.resent + self.extraResent, retried: repeats.retried
            )
            self.unansweredRepeats = repeats
            self.unsavedAccepted = 0
            self.unsavedRejections.removeAll()
            self.extraResent = 0
            return self.send(delta, now: now)
        }

        /// Redis applied the checkpoint (or had applied it already) and renewed the lease.
        mutating func checkpointConfirmed(_ status: CampaignQueueStatus, now: ContinuousClock.Instant) -> Action {
            guard case .checkpointing = self.phase else { return .none }
            self.unanswered = nil
            self.unansweredRepeats = Repeats()
            self.lastConfirmed = self.checkpointSentAt
            if status != .running { self.stopRequested = true }
            return .extendWriteDeadline(until: self.writeDeadline(leaseFrom: self.checkpointSentAt))
        }

        /// The shard has another holder now.
        mutating func checkpointRefused() -> Action {
            self.endWithoutSaving(.leaseLost)
        }

        /// Redis did not answer. The checkpoint is kept and sent again; but once a whole lease has
        /// passed without a confirmed one, another worker may hold the shard: the run ends.
        mutating func checkpointFailed(now: ContinuousClock.Instant) -> Action {
            guard case .checkpointing(let closing) = self.phase else { return .none }
            if closing == .abandoned || now - self.lastConfirmed >= .milliseconds(self.configuration.leaseMilliseconds) {
                return self.endWithoutSaving(.abandoned)
            }
            self.phase = .running
            return .none
        }

        // MARK: - Deciding

        /// The index of `tag`'s position if it is this run's and has no answer yet.
        private func unanswered(_ tag: UInt64) -> Int? {
            guard tag & SlotContext.runTagMask == self.runTag else { return nil }
            let index = Int(tag & ~SlotContext.runTagMask) - self.start
            guard index >= 0, index < self.answers.count, self.answers[index] == .none else { return nil }
            return index
        }

        private mutating func settle(tag: UInt64, rejection: Rejection?) {
            guard let index = self.unanswered(tag) else { return }
            self.answered += 1
            let position = self.start + index
            guard position == self.lowWater else {
                if let rejection {
                    self.answers[index] = rejection.reason.isUnanswered ? .settledUnanswered : .settledRejection
                    self.hold(rejection, at: position)
                } else {
                    self.answers[index] = .settled
                }
                return
            }
            self.answers[index] = .settled
            self.count(rejection)
            self.lowWater += 1
            // The mark moves over every position that was already settled above it.
            passing: while self.lowWater - self.start < self.answers.count {
                switch self.answers[self.lowWater - self.start] {
                case .settled: self.count(nil)
                case .settledRejection, .settledUnanswered: self.count(self.takeHeldRejection())
                case .none, .deferred, .withdrawn: break passing
                }
                self.lowWater += 1
            }
        }

        private mutating func hold(_ rejection: Rejection, at position: Int) {
            if self.heldStart == self.heldRejections.count {
                self.heldRejections.removeAll(keepingCapacity: true)
                self.heldStart = 0
            } else if self.heldStart >= 1_024, self.heldStart * 2 >= self.heldRejections.count {
                self.heldRejections.removeFirst(self.heldStart)
                self.heldStart = 0
            }
            if let last = self.heldRejections.last, last.position > position {
                self.lateRejections[position] = rejection
            } else {
                self.heldRejections.append((position, rejection))
            }
        }

        /// The rejection held for the position at the mark. Every one held below it was taken
        /// already, so it is the front of ``heldRejections`` unless it came late.
        private mutating func takeHeldRejection() -> Rejection {
            if self.heldStart < self.heldRejections.count, self.heldRejections[self.heldStart].position == self.lowWater {
                self.heldStart += 1
                return self.heldRejections[self.heldStart - 1].rejection
            }
            guard let late = self.lateRejections.removeValue(forKey: self.lowWater) else {
                preconditionFailure("no rejection held for position \(self.lowWater)")
            }
            return late
        }

        private mutating func `defer`(tag: UInt64, reason: PauseRequest) {
            guard let index = self.unanswered(tag) else { return }
            self.answers[index] = .deferred
            self.answered += 1
            if self.deferredReason == nil {
                self.deferredReason = reason
                self.pauseToRequest = true
                self.stopRequested = true
            }
        }

        /// Handed-over positions above the mark that may have reached APNs without an answer (none
        /// yet, or none to any attempt): the next holder sends them again. Those accepted are left
        /// with the release as delivered; rejected, deferred and withdrawn ones were not delivered.
        private var possiblyDeliveredAboveMark: Int {
            self.answers[self.handedAboveMark].count { $0 == .none || $0 == .settledUnanswered }
        }

        /// The positions above the mark APNs accepted, and those an earlier holder delivered that
        /// were not handed over yet: what the release leaves for the next holder to count.
        private var deliveredAboveMark: [Int] {
            var delivered: [Int] = []
            for index in self.handedAboveMark where self.answers[index] == .settled { delivered.append(self.start + index) }
            delivered += self.carried[self.nextCarried...]
            return delivered
        }

        /// Indexes into ``answers`` of the handed-over positions from the mark on.
        private var handedAboveMark: Range<Int> {
            (self.lowWater - self.start)..<max(self.lowWater - self.start, self.handedUpTo - self.start)
        }

        private mutating func count(_ rejection: Rejection?) {
            if let rejection {
                self.unsavedRejections.append(rejection)
            } else {
                self.unsavedAccepted += 1
            }
        }

        /// What the run does now, in its running phase.
        private mutating func next(now: ContinuousClock.Instant) -> Action {
            guard case .running = self.phase else { return .none }
            if self.pauseToRequest, let reason = self.deferredReason {
                self.pauseToRequest = false
                return .pauseCampaign(reason)
            }
            if self.stopRequested && self.stopping == nil {
                self.stopping = now
                return .stopFeeding
            }
            if self.stopping != nil && self.feedEnded && !self.withdrawRequested && !self.channelWasReset && !self.channelHalted {
                // Nothing more is handed over: what still waits in the channel's queue need not be
                // waited for.
                self.withdrawRequested = true
                return .withdraw
            }
            let finished = self.lowWater == self.tokenCount
            // Everything handed over has an answer (an outcome, a deferral, or taken back unwritten).
            let drained = self.stopping != nil && self.feedEnded && self.answered == self.handedUpTo - self.start
            let outOfTime = self.channelWasReset || (self.stopping.map { now - $0 >= self.configuration.drainTimeout } ?? false)
            let due = self.unsavedAccepted + self.unsavedRejections.count >= self.configuration.checkpointEvery
                || now - self.lastCheckpoint >= self.configuration.checkpointInterval
            guard due || finished || drained || outOfTime else { return .none }
            let closing: Ending? = finished ? .completed : drained ? .released : outOfTime ? .abandoned : nil
            self.phase = .checkpointing(closing: closing)
            if (closing == .released || closing == .abandoned) && !self.tailCounted {
                // The shard goes back at the mark: what lies above it and may have reached APNs
                // without an answer goes out again, and is counted as re-sent now. Released, that
                // is nothing (every position handed over has an answer); abandoned, what never got
                // one. What was accepted goes with the release, and is not sent again.
                self.tailCounted = true
                self.extraResent = self.possiblyDeliveredAboveMark
            }
            if closing == .abandoned && !self.channelHalted {
                // Stop writing before anyone else can claim the shard.
                self.channelHalted = true
                return .haltChannel
            }
            return self.prepareCheckpoint(closing: closing, now: now)
        }

        private mutating func prepareCheckpoint(closing: Ending?, now: ContinuousClock.Instant) -> Action {
            if let unanswered = self.unanswered { return self.send(unanswered, now: now) }
            return .collectRepeats(fresh: closing != nil)
        }

        private mutating func send(_ delta: CheckpointDelta, now: ContinuousClock.Instant) -> Action {
            self.unanswered = delta
            self.lastCheckpoint = now
            self.checkpointSentAt = now
            return .checkpoint(delta)
        }

        private mutating func endWithoutSaving(_ ending: Ending) -> Action {
            guard self.phase != .ended else { return .none }
            self.phase = .ended
            let giveBack = self.unanswered == nil ? Repeats() : self.unansweredRepeats
            self.unanswered = nil
            return .end(ending, giveBack: giveBack)
        }

        /// The lease, renewed at `instant`, less a margin for the checkpoint's own round trip.
        private func writeDeadline(leaseFrom instant: ContinuousClock.Instant) -> ContinuousClock.Instant {
            let lease = Duration.milliseconds(self.configuration.leaseMilliseconds)
            return instant + lease - min(lease / 3, .seconds(5))
        }
    }
}
