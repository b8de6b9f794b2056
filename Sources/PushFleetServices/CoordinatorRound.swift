import CoreMetrics
import Foundation
public import Logging
import PushFleetCore
public import PushFleetPostgres
import PushFleetRedis
import Synchronization

/// A coordinator's round: for each campaign, what Redis holds is folded into Postgres, and the
/// campaign is completed, paused, resumed, failed or cleaned up as the counts say.
///
/// It reaches Redis and Postgres only through ``CoordinatorQueue`` and ``CoordinatorStore``: the
/// coordinator gives it ``CampaignQueue`` and ``CampaignStore``, a unit test in-memory ones.
public final class CoordinatorRound: Sendable {
    let configuration: CoordinatorService.Configuration
    let queue: any CoordinatorQueue
    let store: any CoordinatorStore
    let logger: Logger
    /// Per campaign, the snapshot this coordinator last wrote to Postgres: a fold writes only the
    /// cursors and `sent` marks that moved since. Forgotten when the campaign's queue goes.
    private let lastFolded = Mutex<[UUID: QueueSnapshot]>([:])
    /// Stream entries read per `XRANGE` while folding.
    static let eventPage = 1_000
    /// The fold lag this round has seen so far, in seconds (see ``FleetMetrics/foldLag``).
    private let roundLag = Mutex<Double>(0)
    private let metrics = FleetMetrics.shared

    public init(configuration: CoordinatorService.Configuration, queue: any CoordinatorQueue, store: any CoordinatorStore, logger: Logger) {
        self.configuration = configuration
        self.queue = queue
        self.store = store
        self.logger = logger
    }

    /// Forgets what was last written for every campaign: another coordinator may have led since.
    func forgetFolds() {
        self.lastFolded.withLock { $0.removeAll() }
    }

    /// Forgets what was last written for campaign `id`: its queue is being rebuilt.
    func forgetFold(of id: UUID) {
        _ = self.lastFolded.withLock { $0.removeValue(forKey: id) }
    }

    /// One pass over every unfinished campaign, then over finished ones whose Redis keys are left.
    /// Each campaign is served on its own: one whose Redis or Postgres data cannot be handled is
    /// logged and tried again next round, and the others go on. A running or paused campaign
    /// whose queue Redis lost is handed to `rebuild`.
    /// - Returns: whether a campaign has more events waiting than the round took.
    @discardableResult
    public func run(rebuild: (CampaignRecord) async throws -> Void) async throws -> Bool {
        var behind = false
        self.roundLag.withLock { $0 = 0 }
        defer { self.metrics.foldLag.set(self.roundLag.withLock { $0 }) }
        let campaigns = try await self.store.campaigns(in: [.pending, .scheduled, .running, .paused, .cancelled])
        let served = Set(campaigns.map(\.id))
        self.lastFolded.withLock { folded in folded = folded.filter { served.contains($0.key) } }
        // A leader whose lock was lost (its round is cancelled) serves no further campaign: one
        // frozen past its lock, then continued, must leave the rest to the leader that took over.
        for campaign in campaigns {
            try Task.checkCancellation()
            try await self.isolated(campaign, "serve") { behind = try await self.serve(campaign, rebuild: rebuild) || behind }
        }
        for campaign in try await self.store.campaignsAwaitingCleanup() {
            try Task.checkCancellation()
            try await self.isolated(campaign, "clean up") { try await self.removeQueue(of: campaign) }
        }
        await self.publishBacklog(campaigns)
        return behind
    }

    /// Runs `body` for one campaign; what it throws is logged, except a lost leadership, which ends
    /// the round (``LeadershipFence``: a later leader serves every campaign now).
    private func isolated(_ campaign: CampaignRecord, _ what: String, _ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as PostgresStoreError where error.code == .leadershipLost {
            throw error
        } catch {
            self.logger.warning(
                "cannot \(what) the campaign; trying again next round", metadata: ["campaign": "\(campaign.id)", "error": "\(error)"]
            )
        }
    }

    /// Folds, and completes, pauses or fails the campaign as its counts say. Returns whether more
    /// of its events wait than one fold takes.
    private func serve(_ campaign: CampaignRecord, rebuild: (CampaignRecord) async throws -> Void) async throws -> Bool {
        if campaign.state == .pending {
            try await self.adoptIfPublished(campaign)
            return false
        }
        if campaign.state == .scheduled {
            try await self.startIfDue(campaign)
            return false
        }
        if campaign.state == .cancelled {
            if campaign.pending > 0 {
                try await self.tellRedis(campaign)
                try await self.finishCancelled(campaign)
            }
            return false
        }
        guard let (counters, caughtUp) = try await self.fold(campaign) else {
            try await rebuild(campaign)
            return false
        }
        if try await self.recordDeadShards(campaign, doneShards: counters.doneShards) { return false }
        let rejected = counters.rejected.values.reduce(0, +)
        if caughtUp, counters.doneShards == campaign.shardCount, counters.accepted + rejected == campaign.total {
            // Only the round that completed it removes its keys: a campaign cancelled meanwhile
            // still needs its counters for the cancelled count.
            if try await self.store.setState(campaign.id, to: .completed, from: [.running, .paused]) {
                self.logger.info("campaign completed", metadata: ["campaign": "\(campaign.id)", "accepted": "\(counters.accepted)", "rejected": "\(rejected)"])
                try await self.removeQueue(of: campaign)
                return false
            }
        }
        var campaign = campaign
        if let request = try await self.queue.pauseRequest(campaign: campaign.id) {
            try await self.recordPause(&campaign, request)
            try await self.queue.clearPauseRequest(campaign: campaign.id)
        }
        if campaign.state == .paused, let at = campaign.autoResumeAt, at <= self.configuration.clock(),
            try await self.store.resumeAfterOutage(campaign.id)
        {
            campaign.state = .running
            self.logger.notice("campaign resumed after an APNs outage", metadata: ["campaign": "\(campaign.id)"])
        }
        try await self.tellRedis(campaign)
        return !caughtUp
    }

    /// A launch that died between publishing to Redis and marking the campaign `running` left it
    /// published but `pending`: the workers may be sending it already, and nobody would fold its
    /// progress. Mark it running. A pending campaign that is not published is a launch still
    /// staging (or one that died before publishing, which a re-run launches again): left alone.
    private func adoptIfPublished(_ campaign: CampaignRecord) async throws {
        guard try await self.queue.isPublished(campaign: campaign.id) else { return }
        if let launch = try await self.queue.launchID(campaign: campaign.id) {
            try await self.store.recordLaunch(campaign.id, launch: launch)
        }
        let state = CampaignState.published(startingAt: campaign.startsAt, now: self.configuration.clock())
        if try await self.store.setState(campaign.id, to: state, from: [.pending]) {
            self.logger.notice("adopted a campaign whose launch published it but did not finish", metadata: ["campaign": "\(campaign.id)"])
        }
    }

    /// A scheduled campaign starts once its time has come: running in Postgres first, then in
    /// Redis, where workers claim it (a Redis that does not answer hears it next round). Until
    /// then Redis is told it is scheduled, in case a rebuild or an adoption said otherwise.
    private func startIfDue(_ campaign: CampaignRecord) async throws {
        var campaign = campaign
        if CampaignState.published(startingAt: campaign.startsAt, now: self.configuration.clock()) == .running,
            try await self.store.setState(campaign.id, to: .running, from: [.scheduled])
        {
            campaign.state = .running
            self.logger.info("scheduled campaign started", metadata: ["campaign": "\(campaign.id)"])
        }
        try await self.tellRedis(campaign)
    }

    /// Records a worker's pause request in Postgres. Over an APNs outage the campaign resumes by
    /// itself after a wait that doubles with each outage; over the provider's credentials or topic
    /// it waits for an operator's `campaign resume`.
    private func recordPause(_ campaign: inout CampaignRecord, _ request: PauseRequest) async throws {
        if request.isOutage {
            let resumeAt = try await self.store.pauseForOutage(
                campaign.id, reason: request.reason, delay: self.configuration.outageResumeDelay, maximum: self.configuration.outageResumeMaximum
            )
            guard let resumeAt else { return }
            campaign.state = .paused
            campaign.autoResumeAt = resumeAt
            self.logger.error(
                "campaign paused: APNs is failing; resuming it later",
                metadata: ["campaign": "\(campaign.id)", "reason": "\(request.reason)", "resume_at": "\(resumeAt)"]
            )
        } else if try await self.store.setState(campaign.id, to: .paused, from: [.running], reason: request.reason) {
            campaign.state = .paused
            self.logger.error("campaign paused: APNs refused the provider", metadata: ["campaign": "\(campaign.id)", "reason": "\(request.reason)"])
        }
    }

    /// Postgres holds the campaign's state; Redis is told it again every round, so an operator's
    /// pause, resume or cancel that Redis missed (it was down) still reaches the workers.
    private func tellRedis(_ campaign: CampaignRecord) async throws {
        if campaign.kind == .campaign {
            // `campaign set-rate` changes Postgres first; a Redis that did not hear it learns it here.
            try await self.queue.setStatus(campaign: campaign.id, CampaignQueueStatus(campaign.state), rateLimit: campaign.rateLimit)
        } else {
            try await self.queue.setStatus(campaign: campaign.id, CampaignQueueStatus(campaign.state))
        }
        if campaign.state == .running || campaign.state == .paused {
            // A rebuild or a launch that died between its two steps may have left it out.
            try await self.queue.ensureActive(campaign: campaign.id, topic: campaign.topic, environment: campaign.environment, kind: campaign.kind)
        }
    }

    /// Records the campaign's dead shards in Postgres (they show in `status`) and, once every other
    /// shard is done, fails the campaign with the reason. `campaign retry` puts them back.
    /// - Returns: whether the campaign was failed now.
    private func recordDeadShards(_ campaign: CampaignRecord, doneShards: Int) async throws -> Bool {
        let dead = try await self.queue.deadShards(campaign: campaign.id)
        let stuck = !dead.isEmpty && doneShards + dead.count >= campaign.shardCount
        guard dead != campaign.deadShards || stuck else { return false }
        let reason = stuck
            ? "\(dead.count) shard\(dead.count == 1 ? "" : "s") given up after \(self.configuration.maximumAttempts) claims without progress "
                + "(\(dead.prefix(10).map(String.init).joined(separator: ", "))\(dead.count > 10 ? ", …" : ""))"
            : nil
        let failed = try await self.store.setDeadShards(campaign.id, dead, failWith: reason)
        if failed {
            self.logger.error("campaign failed", metadata: ["campaign": "\(campaign.id)", "reason": "\(reason ?? "")"])
        } else if dead != campaign.deadShards {
            self.logger.warning("shards given up on", metadata: ["campaign": "\(campaign.id)", "dead": "\(dead)"])
        }
        return failed
    }

    /// Removes a finished campaign's Redis keys and records it; a failure is retried next round.
    private func removeQueue(of campaign: CampaignRecord) async throws {
        try await self.queue.remove(campaign: campaign.id, topic: campaign.topic, environment: campaign.environment, kind: campaign.kind)
        try await self.store.markQueueRemoved(campaign.id)
        _ = self.lastFolded.withLock { $0.removeValue(forKey: campaign.id) }
    }

    /// Settles a cancelled campaign once no worker holds a shard of it: what was never sent is
    /// counted as cancelled, and its Redis keys go.
    private func finishCancelled(_ campaign: CampaignRecord) async throws {
        // Leases first: once none is left, no fenced checkpoint can move the counters any more.
        guard try await self.queue.leaseCount(campaign: campaign.id) == 0 else {
            try await self.fold(campaign)
            return
        }
        // Redis lost the queue: the outcomes the last fold saw are all there is, the rest is cancelled.
        let (counters, caughtUp) = try await self.fold(campaign)
            ?? (CampaignCounters(accepted: campaign.accepted, rejected: campaign.rejected), true)
        guard caughtUp else { return }
        let cancelled = campaign.total - counters.accepted - counters.rejected.values.reduce(0, +)
        try await self.store.setCancelled(campaign.id, count: max(0, cancelled))
        try await self.removeQueue(of: campaign)
        self.logger.info("campaign cancelled", metadata: ["campaign": "\(campaign.id)", "cancelled": "\(cancelled)"])
    }

    /// Folds a campaign's counters, cursors and events into Postgres. Returns the counters, and
    /// whether every event was applied (false when more are waiting than one round takes); nil
    /// when Redis lost the queue (its meta hash is gone, or its snapshot number is not above the
    /// last one folded: an old copy, whose keys are deleted here). Nothing is folded then.
    @discardableResult
    private func fold(_ campaign: CampaignRecord) async throws -> (CampaignCounters, Bool)? {
        let id = campaign.id
        let reaped = try await self.queue.reapExpiredLeases(campaign: id, maximumAttempts: self.configuration.maximumAttempts)
        if reaped > 0 { self.metrics.shardsReaped.increment(by: Int64(reaped)) }
        if reaped > 0 { self.logger.info("re-queued shards whose lease expired", metadata: ["campaign": "\(id)", "shards": "\(reaped)"]) }

        // The snapshot first, then events: a counter never runs behind the events already applied.
        guard let snapshot = try await self.queue.snapshot(campaign: id) else { return nil }
        if snapshot.fold <= campaign.foldSequence {
            self.logger.error(
                "Redis holds an older copy of the campaign's queue than Postgres has folded; deleting it to rebuild",
                metadata: ["campaign": "\(id)", "fold": "\(snapshot.fold)", "folded": "\(campaign.foldSequence)"]
            )
            try await self.queue.forget(campaign: id, shardCount: campaign.shardCount)
            return nil
        }
        let counters = snapshot.counters
        let written = self.lastFolded.withLock { $0[id] }
        let moved = snapshot.cursors.filter { written?.cursors[$0.key] != $0.value }
        let movedSent = snapshot.sentMarks.filter { written?.sentMarks[$0.key] != $0.value }
        var events: [(id: String, event: QueueEvent)] = []
        var rejections: [AppliedRejection] = []
        var doneShards: [Int] = []
        var more = true
        while more && rejections.count + doneShards.count < self.configuration.eventsPerRound {
            let page = try await self.queue.events(
                campaign: id, after: events.last?.id ?? campaign.lastEventID, count: min(Self.eventPage, self.configuration.eventsPerRound)
            )
            for (_, event) in page {
                switch event {
                case .rejected(let rejected, let shard):
                    for rejection in rejected {
                        rejections.append(
                            AppliedRejection(token: rejection.token, reason: rejection.reason, shard: shard, apnsTimestampMilliseconds: rejection.timestampMilliseconds)
                        )
                    }
                case .shardDone(let shard):
                    doneShards.append(shard)
                }
            }
            events += page
            more = page.count == min(Self.eventPage, self.configuration.eventsPerRound)
        }
        let lastEventID = events.last?.id ?? campaign.lastEventID
        let applied = try await self.store.apply(
            ProgressUpdate(
                campaign: id, accepted: counters.accepted, rejected: counters.rejected, resent: counters.resent,
                retried: counters.retried, doneShards: counters.doneShards, rejections: rejections, doneShardIDs: doneShards,
                lastEventID: lastEventID, cursors: moved, sentMarks: movedSent, inFlight: snapshot.inFlight,
                generation: campaign.queueGeneration, foldSequence: snapshot.fold
            )
        )
        if applied {
            self.lastFolded.withLock { $0[id] = snapshot }
            // Workers keep the runs they ended until Postgres holds a snapshot taken after them;
            // if this fails they keep them a round longer, and the round goes on.
            do {
                try await self.queue.markFolded(campaign: id, fold: snapshot.fold)
            } catch {
                self.logger.warning("cannot mark the fold in Redis", metadata: ["campaign": "\(id)", "error": "\(error)"])
            }
        }
        if let last = events.last { try await self.queue.trimEvents(campaign: id, through: last.id) }
        if more, let milliseconds = lastEventID.split(separator: "-").first.flatMap({ Double($0) }) {
            let lag = max(0, Date().timeIntervalSince1970 - milliseconds / 1000)
            self.roundLag.withLock { $0 = max($0, lag) }
        }
        return (counters, !more)
    }

    /// Sets the backlog lists autoscalers read: the unfinished shards of the running campaigns of
    /// each topic and environment, as this round found them.
    private func publishBacklog(_ campaigns: [CampaignRecord]) async {
        var backlog: [BacklogKey: Int] = [:]
        for campaign in campaigns where campaign.state == .running {
            backlog[BacklogKey(topic: campaign.topic, environment: campaign.environment), default: 0] += max(0, campaign.shardCount - campaign.doneShards)
        }
        do {
            try await self.queue.setBacklogs(backlog)
        } catch {
            self.logger.warning("cannot set the backlog lists", metadata: ["error": "\(error)"])
        }
    }
}
