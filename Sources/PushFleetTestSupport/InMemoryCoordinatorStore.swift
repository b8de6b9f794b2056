public import Foundation
import PushFleetCore
public import PushFleetPostgres
public import PushFleetServices
import Synchronization

/// The Postgres half of campaigns, in memory: a ``CoordinatorStore`` for unit tests of the
/// coordinator's round, without Postgres. Each call changes a campaign's row as ``CampaignStore``'s
/// statement does (states, reasons, outage pauses, dead shards, folded progress); a test adds the
/// campaigns with ``add(_:launch:)`` and reads them back with ``row(_:)``.
///
/// Not kept: the token registry that applied rejections mark, and the stored audiences that
/// ``markQueueRemoved(_:)`` deletes.
public final class InMemoryCoordinatorStore: CoordinatorStore {
    /// One campaign's row, with its shards' and its token failures'.
    public struct Row: Sendable {
        /// The campaign as ``CampaignStore/campaigns(in:)`` reads it.
        public var record: CampaignRecord
        /// The launch whose stored shards it holds (``recordLaunch(_:launch:)``).
        public var launch: String?
        /// Whether its Redis keys were removed (``markQueueRemoved(_:)``).
        public var queueRemoved = false
        /// Pauses for an APNs outage so far: each doubles the wait of the next.
        public var outagePauses = 0
        /// Tokens handed to senders past their shard's cursor, as last folded.
        public var inFlight = 0
        /// Shard → cursor, and shard → `sent` mark, as folded.
        public var cursors: [Int: Int] = [:]
        public var sentMarks: [Int: Int] = [:]
        /// Shards marked done by their `shard_done` events.
        public var doneShardIDs: Set<Int> = []
        /// The rejected tokens applied (`token_failures`), one per token, in the order applied.
        public var tokenFailures: [AppliedRejection] = []
    }

    struct State {
        var rows: [UUID: Row] = [:]
        var failures = InjectedFailures()
    }

    private let state = Mutex(State())
    /// Postgres' `now()`: when outage pauses end, and campaigns start and finish.
    private let clock: @Sendable () -> Date

    public init(clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
    }

    // MARK: - For tests

    /// Adds a campaign (replacing one with its id), as a launch writes it.
    public func add(_ record: CampaignRecord, launch: String? = nil) {
        self.state.withLock { $0.rows[record.id] = Row(record: record, launch: launch) }
    }

    /// The campaign's row; nil for an unknown id.
    public func row(_ id: UUID) -> Row? {
        self.state.withLock { $0.rows[id] }
    }

    /// The campaign as ``CampaignStore/campaign(_:)`` reads it; nil for an unknown id.
    public func record(_ id: UUID) -> CampaignRecord? {
        self.row(id)?.record
    }

    /// Makes the next call of `method` (its name without arguments: `apply`, `setState`) throw
    /// ``InjectedFailure``; with `campaign`, the next call about that campaign.
    public func failNext(_ method: String, campaign: UUID? = nil) {
        self.state.withLock { $0.failures.add(method, campaign: campaign) }
    }

    /// Runs `body` on the rows, after throwing if the test asked this call to fail.
    /// - Parameter function: The protocol method called (`#function`).
    private func call<Value: Sendable>(_ function: String, _ id: UUID?, _ body: (inout State) throws -> Value) throws -> Value {
        try self.state.withLock { state in
            try state.failures.check(function, campaign: id)
            return try body(&state)
        }
    }

    // MARK: - CoordinatorStore

    /// The campaigns in any of `states`, oldest first.
    public func campaigns(in states: [CampaignState]) async throws -> [CampaignRecord] {
        try self.call(#function, nil) { state in
            Self.oldestFirst(state.rows.values.map(\.record).filter { states.contains($0.state) })
        }
    }

    /// Completed campaigns, and cancelled ones with nothing pending, whose Redis keys are not
    /// removed yet; oldest first.
    public func campaignsAwaitingCleanup() async throws -> [CampaignRecord] {
        try self.call(#function, nil) { state in
            Self.oldestFirst(
                state.rows.values.filter { !$0.queueRemoved }.map(\.record).filter {
                    $0.state == .completed || ($0.state == .cancelled && $0.pending == 0)
                }
            )
        }
    }

    /// Moves the campaign to `state` if it is in one of `allowed`, with `reason` (nil clears it)
    /// and no outage resume time; entering `running` sets `startedAt` the first time, a final
    /// state `finishedAt`. - Returns: whether it did; false for an unknown id.
    public func setState(_ id: UUID, to state: CampaignState, from allowed: [CampaignState], reason: String?) async throws -> Bool {
        let now = self.clock()
        return try self.call(#function, id) { rows in
            guard var record = rows.rows[id]?.record, allowed.contains(record.state) else { return false }
            record.state = state
            record.stateReason = reason
            record.autoResumeAt = nil
            if state == .running, record.startedAt == nil { record.startedAt = now }
            if state.isFinal, record.finishedAt == nil { record.finishedAt = now }
            rows.rows[id]?.record = record
            return true
        }
    }

    public func recordLaunch(_ id: UUID, launch: String) async throws {
        try self.call(#function, id) { $0.rows[id]?.launch = launch }
    }

    /// Pauses a running campaign with `reason` until now plus `delay` doubled for each earlier
    /// outage pause of it, at most `maximum`. - Returns: that time; nil if it was not running.
    public func pauseForOutage(_ id: UUID, reason: String, delay: Duration, maximum: Duration) async throws -> Date? {
        let now = self.clock()
        return try self.call(#function, id) { state in
            guard var row = state.rows[id], row.record.state == .running else { return nil }
            let wait = min(delay / .seconds(1) * pow(2, Double(min(row.outagePauses, 30))), maximum / .seconds(1))
            row.record.state = .paused
            row.record.stateReason = reason
            row.record.autoResumeAt = now.addingTimeInterval(wait)
            row.outagePauses += 1
            state.rows[id] = row
            return row.record.autoResumeAt
        }
    }

    /// Resumes a campaign paused for an outage whose resume time is now or past.
    public func resumeAfterOutage(_ id: UUID) async throws -> Bool {
        let now = self.clock()
        return try self.call(#function, id) { state in
            guard var record = state.rows[id]?.record, record.state == .paused, let at = record.autoResumeAt, at <= now else { return false }
            record.state = .running
            record.stateReason = nil
            record.autoResumeAt = nil
            state.rows[id]?.record = record
            return true
        }
    }

    /// Records the dead shards and, with a `reason`, fails a running or paused campaign with it.
    /// - Returns: whether the campaign is failed now with a reason given (false for an unknown id).
    public func setDeadShards(_ id: UUID, _ shards: [Int], failWith reason: String?) async throws -> Bool {
        let now = self.clock()
        return try self.call(#function, id) { state in
            guard var record = state.rows[id]?.record else { return false }
            record.deadShards = shards
            if let reason, record.state == .running || record.state == .paused {
                record.state = .failed
                record.stateReason = reason
                record.finishedAt = now
            }
            state.rows[id]?.record = record
            return reason != nil && record.state == .failed
        }
    }

    public func markQueueRemoved(_ id: UUID) async throws {
        try self.call(#function, id) { $0.rows[id]?.queueRemoved = true }
    }

    /// Raises the count of tokens the cancel left unsent.
    /// - Throws: ``InMemoryStoreError/unknownCampaign(_:)``.
    public func setCancelled(_ id: UUID, count: Int) async throws {
        try self.call(#function, id) { state in
            guard var record = state.rows[id]?.record else { throw InMemoryStoreError.unknownCampaign(id) }
            record.cancelled = max(record.cancelled, count)
            state.rows[id]?.record = record
        }
    }

    /// Folds one round as ``CampaignStore/apply(_:)`` does: counters and cursors only ever raised;
    /// `inFlight` and `sent` marks written only from a snapshot numbered above the stored one;
    /// events applied once, an update carrying events whose last id is not newer than the stored
    /// one being skipped whole.
    /// - Returns: false if the update was skipped.
    /// - Throws: ``InMemoryStoreError`` for an unknown campaign, a malformed event id, or an update
    ///   read from another generation of the queue (nothing is written then).
    public func apply(_ update: ProgressUpdate) async throws -> Bool {
        let id = update.campaign
        return try self.call(#function, id) { state in
            guard let eventID = StreamID(update.lastEventID) else { throw InMemoryStoreError.invalidEventID(update.lastEventID) }
            guard var row = state.rows[id] else { throw InMemoryStoreError.unknownCampaign(id) }
            if let generation = update.generation, generation != row.record.queueGeneration {
                throw InMemoryStoreError.queueRebuilt(id, read: generation, stored: row.record.queueGeneration)
            }
            let stored = StreamID(row.record.lastEventID) ?? StreamID(milliseconds: 0, sequence: 0)
            let newer = eventID > stored
            if update.hasEvents && !newer { return false }

            row.record.accepted = max(row.record.accepted, update.accepted)
            row.record.resent = max(row.record.resent, update.resent)
            row.record.retried = max(row.record.retried, update.retried)
            row.record.doneShards = max(row.record.doneShards, update.doneShards)
            let storedFold = row.record.foldSequence
            if (update.foldSequence ?? -1) > storedFold { row.inFlight = update.inFlight ?? row.inFlight }
            row.record.foldSequence = max(storedFold, update.foldSequence ?? 0)
            row.record.lastEventID = (newer ? eventID : stored).description
            // Only shards the campaign has rows for.
            for (shard, cursor) in update.cursors where (0..<row.record.shardCount).contains(shard) {
                row.cursors[shard] = max(row.cursors[shard] ?? 0, cursor)
            }
            if let fold = update.foldSequence, fold > storedFold {
                for (shard, sent) in update.sentMarks where (0..<row.record.shardCount).contains(shard) { row.sentMarks[shard] = sent }
            }
            for (reason, count) in update.rejected {
                row.record.rejected[reason] = max(row.record.rejected[reason] ?? 0, count)
            }
            for rejection in update.rejections where !row.tokenFailures.contains(where: { $0.token == rejection.token }) {
                row.tokenFailures.append(rejection)
            }
            row.doneShardIDs.formUnion(update.doneShardIDs)
            state.rows[id] = row
            return true
        }
    }

    private static func oldestFirst(_ records: [CampaignRecord]) -> [CampaignRecord] {
        records.sorted { ($0.createdAt, $0.id.uuidString) < ($1.createdAt, $1.id.uuidString) }
    }
}

/// What ``InMemoryCoordinatorStore`` refuses, where ``CampaignStore`` throws a ``PostgresStoreError``.
public enum InMemoryStoreError: Error, Hashable, Sendable {
    /// No campaign has the id (`unknownCampaign`).
    case unknownCampaign(UUID)
    /// A Redis stream id is not `milliseconds-sequence` (`invalidEventID`).
    case invalidEventID(String)
    /// A fold read an earlier generation of the campaign's queue (`queueRebuilt`).
    case queueRebuilt(UUID, read: Int, stored: Int)
}
