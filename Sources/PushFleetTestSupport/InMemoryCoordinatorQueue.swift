public import Foundation
public import PushFleetCore
public import PushFleetRedis
public import PushFleetServices
import Synchronization

/// The Redis half of campaigns, in memory: a ``CoordinatorQueue`` for unit tests of the
/// coordinator's round, without Redis. Each call does what ``CampaignQueue``'s does to the keys the
/// round reads (a campaign's meta hash, stats, cursors, `sent` marks, pending, leases, attempts,
/// dead list and event stream, and the active sets); the setters below put a campaign's keys where
/// a test wants them, as launches and workers would.
public final class InMemoryCoordinatorQueue: CoordinatorQueue {
    /// One campaign's keys.
    public struct Campaign: Sendable {
        /// Whether its meta hash exists: a launch published it, and it was not lost or removed since.
        public var isPublished = false
        /// The meta hash's `status`, `rate`, `launch` and pause request fields.
        public var status: CampaignQueueStatus?
        public var rateLimit: Int?
        public var launch: String?
        public var pauseRequest: PauseRequest?
        /// The number of the last snapshot taken (the meta hash's `fold`), and of the last one
        /// Postgres holds (`folded`).
        public var fold = 0
        public var folded = 0
        public var counters = CampaignCounters()
        public var cursors: [Int: Int] = [:]
        public var sentMarks: [Int: Int] = [:]
        /// Shards waiting to be claimed, the next first.
        public var pending: [Int] = []
        /// Leased shards → whether the lease has expired.
        public var leases: [Int: Bool] = [:]
        /// Shard → holders it has lost.
        public var attempts: [Int: Int] = [:]
        public var deadShards: [Int] = []
        /// The event stream, oldest first.
        public var events: [(id: String, event: QueueEvent)] = []
    }

    /// An entry of an active set (`pf:active:…` or `pf:now:…`).
    struct ActiveEntry: Hashable {
        var campaign: UUID
        var topic: String
        var environment: APNsEnvironment
        var kind: CampaignKind
    }

    struct State {
        var campaigns: [UUID: Campaign] = [:]
        var active: Set<ActiveEntry> = []
        var backlogs: [BacklogKey: Int] = [:]
        /// The last stream id handed out by ``addEvents(_:_:)``.
        var lastEventID = StreamID(milliseconds: 1_700_000_000_000, sequence: 0)
        var failures = InjectedFailures()
    }

    private let state = Mutex(State())

    public init() {}

    // MARK: - For tests

    /// The campaign's keys; nil when it has none (never written, removed or forgotten).
    public func record(_ id: UUID) -> Campaign? {
        self.state.withLock { $0.campaigns[id] }
    }

    /// Whether the campaign is in an active set, where workers look for work.
    public func isActive(_ id: UUID) -> Bool {
        self.state.withLock { $0.active.contains { $0.campaign == id } }
    }

    /// The backlog lists as the last ``setBacklogs(_:)`` left them (lengths above 0 only).
    public var backlogs: [BacklogKey: Int] {
        self.state.withLock { $0.backlogs }
    }

    /// Makes the next call of `method` (its name without arguments: `snapshot`, `setStatus`) throw
    /// ``InjectedFailure``; with `campaign`, the next call about that campaign.
    public func failNext(_ method: String, campaign: UUID? = nil) {
        self.state.withLock { $0.failures.add(method, campaign: campaign) }
    }

    /// Writes the meta hash as a launch publishes it: with `status` and the `launch` whose shards
    /// it holds. A campaign published already keeps its other fields.
    public func setPublished(_ id: UUID, status: CampaignQueueStatus = .running, launch: String? = nil) {
        self.update(id) { campaign in
            campaign.isPublished = true
            campaign.status = status
            campaign.launch = launch
        }
    }

    /// Sets the counters, cursors and `sent` marks workers' checkpoints left, publishing the
    /// campaign (running) if it is not; with `fold`, the number of the last snapshot taken (the next
    /// one is numbered above it).
    public func setSnapshot(_ id: UUID, counters: CampaignCounters, cursors: [Int: Int] = [:], sentMarks: [Int: Int] = [:], fold: Int? = nil) {
        self.update(id) { campaign in
            if !campaign.isPublished {
                campaign.isPublished = true
                campaign.status = .running
            }
            campaign.counters = counters
            campaign.cursors = cursors
            campaign.sentMarks = sentMarks
            if let fold { campaign.fold = fold }
        }
    }

    /// Appends events to the campaign's stream, as checkpoints do. - Returns: their ids, in order.
    @discardableResult
    public func addEvents(_ id: UUID, _ events: [QueueEvent]) -> [String] {
        self.state.withLock { state in
            var added: [(id: String, event: QueueEvent)] = []
            for event in events {
                state.lastEventID.sequence += 1
                added.append((state.lastEventID.description, event))
            }
            state.campaigns[id, default: Campaign()].events += added
            return added.map(\.id)
        }
    }

    /// Sets the leased shards (replacing any), those of `expired` with a lease that has expired.
    public func setLeases(_ id: UUID, _ shards: [Int], expired: [Int] = []) {
        self.update(id) { campaign in
            campaign.leases = Dictionary(uniqueKeysWithValues: shards.map { ($0, expired.contains($0)) })
        }
    }

    /// Sets the shards given up on (`pf:{C}:dead`).
    public func setDeadShards(_ id: UUID, _ shards: [Int]) {
        self.update(id) { $0.deadShards = shards }
    }

    /// A worker's pause request, as ``CampaignQueue/requestPause(campaign:reason:outage:)`` makes
    /// it: a running campaign is paused at once, and the first reason stays.
    /// - Returns: whether it was running.
    @discardableResult
    public func requestPause(campaign id: UUID, reason: String, outage: Bool = false) -> Bool {
        self.state.withLock { state in
            guard var campaign = state.campaigns[id], campaign.isPublished, campaign.status == .running else { return false }
            campaign.status = .paused
            if campaign.pauseRequest == nil { campaign.pauseRequest = PauseRequest(reason: reason, isOutage: outage) }
            state.campaigns[id] = campaign
            return true
        }
    }

    private func update(_ id: UUID, _ body: (inout Campaign) -> Void) {
        self.state.withLock { body(&$0.campaigns[id, default: Campaign()]) }
    }

    /// Runs `body` on the campaign's keys, after throwing if the test asked this call to fail.
    /// - Parameter function: The protocol method called (`#function`).
    private func call<Value: Sendable>(
        _ function: String, _ id: UUID?, _ body: (inout State) throws -> Value
    ) throws -> Value {
        try self.state.withLock { state in
            try state.failures.check(function, campaign: id)
            return try body(&state)
        }
    }

    // MARK: - CoordinatorQueue

    public func isPublished(campaign id: UUID) async throws -> Bool {
        try self.call(#function, id) { $0.campaigns[id]?.isPublished ?? false }
    }

    public func launchID(campaign id: UUID) async throws -> String? {
        try self.call(#function, id) { state in
            state.campaigns[id].flatMap { $0.isPublished ? $0.launch : nil }
        }
    }

    public func pauseRequest(campaign id: UUID) async throws -> PauseRequest? {
        try self.call(#function, id) { state in
            state.campaigns[id].flatMap { $0.isPublished ? $0.pauseRequest : nil }
        }
    }

    public func clearPauseRequest(campaign id: UUID) async throws {
        try self.call(#function, id) { $0.campaigns[id]?.pauseRequest = nil }
    }

    public func setStatus(campaign id: UUID, _ status: CampaignQueueStatus) async throws {
        try self.call(#function, id) { state in
            guard state.campaigns[id]?.isPublished == true else { return }
            state.campaigns[id]?.status = status
            if status == .running { state.campaigns[id]?.pauseRequest = nil }
        }
    }

    public func setStatus(campaign id: UUID, _ status: CampaignQueueStatus, rateLimit: Int?) async throws {
        try self.call(#function, id) { state in
            guard state.campaigns[id]?.isPublished == true else { return }
            state.campaigns[id]?.status = status
            state.campaigns[id]?.rateLimit = rateLimit
            if status == .running { state.campaigns[id]?.pauseRequest = nil }
        }
    }

    public func ensureActive(campaign id: UUID, topic: String, environment: APNsEnvironment, kind: CampaignKind) async throws {
        try self.call(#function, id) { state in
            _ = state.active.insert(ActiveEntry(campaign: id, topic: topic, environment: environment, kind: kind))
        }
    }

    public func deadShards(campaign id: UUID) async throws -> [Int] {
        try self.call(#function, id) { $0.campaigns[id]?.deadShards ?? [] }
    }

    public func remove(campaign id: UUID, topic: String, environment: APNsEnvironment, kind: CampaignKind) async throws {
        try self.call(#function, id) { state in
            state.active.remove(ActiveEntry(campaign: id, topic: topic, environment: environment, kind: kind))
            state.campaigns[id] = nil
        }
    }

    public func leaseCount(campaign id: UUID) async throws -> Int {
        try self.call(#function, id) { $0.campaigns[id]?.leases.count ?? 0 }
    }

    /// Ends expired leases (at most ``CampaignQueue/reapLimit``, lowest shard first): each shard
    /// goes to the front of pending, or to the dead list once it has lost `maximumAttempts` holders.
    public func reapExpiredLeases(campaign id: UUID, maximumAttempts: Int) async throws -> Int {
        try self.call(#function, id) { state in
            guard var campaign = state.campaigns[id] else { return 0 }
            let expired = campaign.leases.filter(\.value).keys.sorted().prefix(CampaignQueue.reapLimit)
            for shard in expired {
                campaign.leases[shard] = nil
                campaign.attempts[shard, default: 0] += 1
                if campaign.attempts[shard, default: 0] >= maximumAttempts {
                    campaign.deadShards.append(shard)
                } else {
                    campaign.pending.insert(shard, at: 0)
                }
            }
            state.campaigns[id] = campaign
            return expired.count
        }
    }

    /// Numbers a new snapshot above the last one, as the snapshot script does; `inFlight` is what
    /// the `sent` marks are past their cursors.
    public func snapshot(campaign id: UUID) async throws -> QueueSnapshot? {
        try self.call(#function, id) { state in
            guard var campaign = state.campaigns[id], campaign.isPublished else { return nil }
            campaign.fold += 1
            state.campaigns[id] = campaign
            let inFlight = campaign.sentMarks.reduce(0) { sum, mark in sum + max(0, mark.value - (campaign.cursors[mark.key] ?? 0)) }
            return QueueSnapshot(
                counters: campaign.counters, cursors: campaign.cursors, sentMarks: campaign.sentMarks, inFlight: inFlight, fold: campaign.fold
            )
        }
    }

    /// Deletes every key of the campaign; its active-set entry stays.
    public func forget(campaign id: UUID, shardCount: Int) async throws {
        try self.call(#function, id) { $0.campaigns[id] = nil }
    }

    /// Up to `count` events with ids after `id`, oldest first.
    /// - Throws: ``InMemoryQueueError/invalidStreamID(_:)`` when `id` is not a stream id.
    public func events(campaign: UUID, after id: String, count: Int) async throws -> [(id: String, event: QueueEvent)] {
        guard let after = StreamID(id) else { throw InMemoryQueueError.invalidStreamID(id) }
        return try self.call(#function, campaign) { state in
            let events = state.campaigns[campaign]?.events ?? []
            return Array(events.filter { StreamID($0.id).map { $0 > after } ?? false }.prefix(count))
        }
    }

    /// Raises the meta hash's `folded` to `fold`; nothing when the campaign is not published.
    public func markFolded(campaign id: UUID, fold: Int) async throws {
        try self.call(#function, id) { state in
            guard let campaign = state.campaigns[id], campaign.isPublished else { return }
            state.campaigns[id]?.folded = max(campaign.folded, fold)
        }
    }

    /// Deletes the events up to and including `id`.
    /// - Throws: ``InMemoryQueueError/invalidStreamID(_:)`` unless `id` is `milliseconds-sequence`.
    public func trimEvents(campaign: UUID, through id: String) async throws {
        guard id.split(separator: "-").count == 2, let through = StreamID(id) else { throw InMemoryQueueError.invalidStreamID(id) }
        try self.call(#function, campaign) { state in
            state.campaigns[campaign]?.events.removeAll { StreamID($0.id).map { $0 <= through } ?? false }
        }
    }

    /// Sets each backlog list to its length; those not in `shards`, or of length 0, are gone.
    public func setBacklogs(_ shards: [BacklogKey: Int]) async throws {
        try self.call(#function, nil) { $0.backlogs = shards.filter { $0.value > 0 } }
    }
}

/// What ``InMemoryCoordinatorQueue`` refuses, where Redis would answer with an error.
public enum InMemoryQueueError: Error, Hashable, Sendable {
    /// The text is not a stream id (`milliseconds-sequence`).
    case invalidStreamID(String)
}
