public import APNSTransport
public import Logging
public import PushFleetPostgres
public import PushFleetRedis
import CoreMetrics
import APNSWire
public import Foundation
public import PushFleetCore
import Synchronization

/// The only writer of progress to Postgres. One instance leads (a Postgres advisory lock); others
/// wait. About once a second it folds each campaign's counters and events from Redis into Postgres
/// idempotently, re-queues shards whose lease expired, marks the rejected tokens the registry holds, polls
/// the binary feedback services it is told about, and finishes campaigns whose counts reconcile.
public final class CoordinatorService: Sendable {
    /// A binary feedback service to poll, and whose tokens it speaks of.
    public struct FeedbackSource: Sendable {
        public var host: String
        public var port: Int
        public var tls: ClientTLS
        public var serverHostname: String?
        public var topic: String
        public var environment: APNsEnvironment

        public init(host: String, port: Int, tls: ClientTLS, serverHostname: String? = nil, topic: String, environment: APNsEnvironment) {
            self.host = host
            self.port = port
            self.tls = tls
            self.serverHostname = serverHostname
            self.topic = topic
            self.environment = environment
        }
    }

    public struct Configuration: Sendable {
        /// Time between two rounds. Defaults to 1 second.
        public var interval: Duration
        /// Claims of one shard before it is set aside as dead. Defaults to 5.
        public var maximumAttempts: Int
        /// Rejected tokens and finished shards folded per campaign per round, read in pages of
        /// stream entries (one entry holds a checkpoint's rejections); a round may take one
        /// entry's worth more. Defaults to 20,000.
        public var eventsPerRound: Int
        public var feedback: [FeedbackSource]
        /// Time between two polls of each feedback service. Defaults to 60 seconds.
        public var feedbackInterval: Duration
        /// Per-token failures (`token_failure_batches`) older than this are deleted, every 10 minutes, and
        /// notifications (doorbell rings) finished longer ago, with their per-device records;
        /// `nil` keeps them forever. Campaign counts and the registry are not touched. Defaults to
        /// 30 days.
        public var tokenFailureRetention: Duration?
        /// How long a campaign paused by an APNs outage (5xx, 429 past the retries) waits before
        /// it is resumed; doubled for each further outage of the campaign, up to
        /// ``outageResumeMaximum``. Defaults to 30 seconds.
        public var outageResumeDelay: Duration
        /// The longest wait before resuming after an outage. Defaults to 10 minutes.
        public var outageResumeMaximum: Duration
        /// The time scheduled campaigns start by, and outage pauses end by. Defaults to the
        /// system's clock; a test's own otherwise.
        public var clock: @Sendable () -> Date

        public init(
            interval: Duration = .seconds(1), maximumAttempts: Int = 5, eventsPerRound: Int = 20_000,
            feedback: [FeedbackSource] = [], feedbackInterval: Duration = .seconds(60),
            tokenFailureRetention: Duration? = .seconds(30 * 86_400),
            outageResumeDelay: Duration = .seconds(30), outageResumeMaximum: Duration = .seconds(600),
            clock: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.clock = clock
            self.outageResumeDelay = outageResumeDelay
            self.outageResumeMaximum = max(outageResumeDelay, outageResumeMaximum)
            self.interval = interval
            self.maximumAttempts = maximumAttempts
            self.eventsPerRound = eventsPerRound
            self.feedback = feedback
            self.feedbackInterval = feedbackInterval
            self.tokenFailureRetention = tokenFailureRetention
        }
    }

    public let configuration: Configuration
    let queue: CampaignQueue
    let store: CampaignStore
    let logger: Logger
    /// The folding, completing, pausing and failing of campaigns, round by round.
    let rounds: CoordinatorRound
    let metrics = FleetMetrics.shared
    private let leading = Atomic<Bool>(false)

    /// Whether this coordinator leads now.
    public var isLeading: Bool { self.leading.load(ordering: .relaxed) }

    public init(configuration: Configuration, queue: CampaignQueue, store: CampaignStore, logger: Logger) {
        self.configuration = configuration
        self.queue = queue
        self.store = store
        self.logger = logger
        self.rounds = CoordinatorRound(configuration: configuration, queue: queue, store: store, logger: logger)
    }

    /// Leads when it can, until `drain` is triggered.
    public func run(until drain: DrainSignal) async {
        while !drain.isTriggered {
            do {
                let led: Void? = try await self.store.withLeadership {
                    self.logger.info("coordinator leads")
                    self.setLeading(true)
                    defer { self.setLeading(false) }
                    await self.lead(until: drain)
                }
                if led == nil { await drain.sleep(for: self.configuration.interval) }
            } catch {
                self.logger.warning("coordinator round failed", metadata: ["error": "\(error)"])
                await drain.sleep(for: self.configuration.interval)
            }
        }
    }

    /// Rounds until drained, or until cancelled: the store cancels this when the leadership
    /// connection is lost (Postgres stopped, a network cut), and `run` then contends again.
    private func lead(until drain: DrainSignal) async {
        // Another leader may have written since this one last led: what it remembers writing is
        // no longer what Postgres holds (`sent` marks may have been lowered since, and rewritten).
        self.rounds.forgetFolds()
        var lastFeedbackPoll: ContinuousClock.Instant? = nil
        var lastPrune: ContinuousClock.Instant? = nil
        while !drain.isTriggered && !Task.isCancelled {
            var behind = false
            do {
                let started = ContinuousClock.now
                behind = try await self.round()
                self.metrics.roundDuration.record(ContinuousClock.now - started)
                if lastFeedbackPoll.map({ ContinuousClock.now - $0 >= self.configuration.feedbackInterval }) ?? true {
                    lastFeedbackPoll = .now
                    await self.pollFeedback()
                }
                if lastPrune.map({ ContinuousClock.now - $0 >= .seconds(600) }) ?? true {
                    lastPrune = .now
                    await self.pruneExpired()
                    await self.pruneShardTokens()
                }
            } catch let error as PostgresStoreError where error.code == .leadershipLost {
                // A later leadership has begun (this one was frozen past its session): it leads now.
                self.logger.warning("coordinator stops leading", metadata: ["error": "\(error)"])
                return
            } catch {
                self.logger.warning("coordinator round failed", metadata: ["error": "\(error)"])
            }
            // More events wait than one round takes (a stale audience's rejections): go on at once.
            if !behind { await drain.sleep(for: self.configuration.interval) }
        }
    }

    /// One pass over every unfinished campaign, then over finished ones whose Redis keys are left
    /// (``CoordinatorRound/run(rebuild:)``); a queue Redis lost is rebuilt from Postgres.
    /// - Returns: whether a campaign has more events waiting than the round took.
    @discardableResult
    public func round() async throws -> Bool {
        try await self.rounds.run { campaign in try await self.rebuildQueue(of: campaign) }
    }

    private func setLeading(_ leads: Bool) {
        self.leading.store(leads, ordering: .relaxed)
        self.metrics.leader.set(leads ? 1 : 0)
        // Only the leader folds: a standby's lag is nothing, not the last one it saw.
        if !leads { self.metrics.foldLag.set(0) }
    }

    /// Sets the gauges read from Postgres (campaigns by state, pending tokens, dead shards); a
    /// standby coordinator reads them too. Called before each scrape of its metrics.
    public func refreshGauges() async {
        do {
            let counts = try await self.store.campaignCountsByState()
            let unfinished = try await self.store.campaigns(in: [.pending, .running, .paused])
            self.metrics.observe(counts: counts, unfinished: unfinished)
        } catch {
            self.logger.warning("cannot read campaigns for the metrics", metadata: ["error": "\(error)"])
        }
    }

    /// Deletes what is past the retention (`tokenFailureRetention`): token failures, and
    /// notifications (doorbell rings) finished before it with their per-device records. A few at a
    /// time (10 batches of up to 10,000 rejections, 10,000 notifications), so one statement never
    /// holds a long lock.
    private func pruneExpired() async {
        guard let retention = self.configuration.tokenFailureRetention else { return }
        let cutoff = Date(timeIntervalSinceNow: -Double(retention.components.seconds))
        let store = self.store
        let kinds: [(String, Int, @Sendable (Date, Int) async throws -> Int)] = [
            ("token failure batches", 10, { try await store.pruneTokenFailures(observedBefore: $0, limit: $1) }),
            ("notifications", 10_000, { try await store.pruneNotifications(finishedBefore: $0, limit: $1) }),
        ]
        for (what, limit, prune) in kinds {
            do {
                var deleted = 0
                while true {
                    let batch = try await prune(cutoff, limit)
                    deleted += batch
                    if batch < limit { break }
                }
                if deleted > 0 { self.logger.info("pruned \(what)", metadata: ["deleted": "\(deleted)", "before": "\(cutoff)"]) }
            } catch {
                self.logger.warning("cannot prune \(what)", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Deletes stored audiences nobody will read (finished campaigns, launches that lost or died).
    private func pruneShardTokens() async {
        do {
            let deleted = try await self.store.pruneShardTokens()
            if deleted > 0 { self.logger.info("pruned stored shard tokens", metadata: ["shards": "\(deleted)"]) }
        } catch {
            self.logger.warning("cannot prune stored shard tokens", metadata: ["error": "\(error)"])
        }
    }

    private func pollFeedback() async {
        for source in self.configuration.feedback {
            do {
                let read = try await FeedbackClient.fetch(
                    host: source.host, port: source.port, tls: source.tls, serverHostname: source.serverHostname, on: .shared
                )
                if let failure = read.failure {
                    // The tuples read before it are applied all the same: the service has forgotten them.
                    self.logger.warning("the feedback service's answer ended early", metadata: ["error": "\(failure)", "tuples": "\(read.tuples.count)"])
                }
                let tuples = read.tuples
                guard !tuples.isEmpty else { continue }
                try await self.store.markTokens(
                    tuples.map { (token: $0.token, status: .unregistered, reason: .unregistered, since: Date(timeIntervalSince1970: TimeInterval($0.timestamp))) },
                    topic: source.topic, environment: source.environment
                )
                self.logger.info("applied the feedback service", metadata: ["endpoint": "\(source.host):\(source.port)", "tokens": "\(tuples.count)"])
            } catch {
                self.logger.warning("cannot poll the feedback service", metadata: ["endpoint": "\(source.host):\(source.port)", "error": "\(error)"])
            }
        }
    }
}

extension CampaignQueueStatus {
    /// The status workers see for a campaign in `state`.
    init(_ state: CampaignState) {
        switch state {
        case .scheduled: self = .scheduled
        case .paused: self = .paused
        case .cancelled, .completed, .failed: self = .cancelled
        case .pending, .running: self = .running
        }
    }
}
