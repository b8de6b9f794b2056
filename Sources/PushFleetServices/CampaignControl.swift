public import Foundation
import PushFleetCore
public import PushFleetPostgres
public import PushFleetRedis

/// An operator's control of a campaign, or of every part of a launch in parts (a split test's
/// variants) by the launch's id: pause, resume, cancel, throttle, retry. `pushfleet campaign`
/// parses and prints; this changes Postgres, where the state is, then tells Redis, which workers
/// read. A Redis that does not answer hears it from the coordinator, which tells Redis what
/// Postgres holds every round.
public struct CampaignControl: Sendable {
    public enum Change: Sendable, Hashable {
        case pause
        case resume
        case cancel
        /// At most this many notifications a second, fleet-wide; nil lifts the limit. A launch in
        /// parts shares it between the parts that start together, as their audiences share their sum.
        case setRate(Int?)
    }

    /// What a change did to one campaign the id names.
    public struct PartResult: Sendable {
        /// `campaign <id>`, or `variant A (campaign <id>)` for a part of a launch.
        public var name: String
        /// Whether it is a part of a launch in parts: a part that cannot change is left as it is,
        /// where a campaign of its own is an error.
        public var isPart: Bool
        /// What was done (` paused`, `: at most 400 notifications a second`), or why it could not
        /// be (`is completed; it cannot become paused`).
        public var outcome: Result<String, CampaignControlError>
        /// Postgres changed but Redis did not hear it.
        public var redisError: (any Error)?
    }

    let queue: CampaignQueue
    let store: CampaignStore

    public init(queue: CampaignQueue, store: CampaignStore) {
        self.queue = queue
        self.store = store
    }

    /// Applies `change` to the campaign `id`, or to each part of the launch `id`, calling `report`
    /// with what became of each as soon as it is done (so that what was changed is told even if a
    /// later part fails). Messages name the id as `spelled` (as the operator typed it).
    /// - Throws: ``CampaignControlError`` when nothing has that id, when a campaign of its own cannot
    ///   change, or when no part of a launch could.
    public func apply(_ change: Change, to id: UUID, spelled: String? = nil, report: (PartResult) -> Void) async throws {
        let spelled = spelled ?? id.uuidString.lowercased()
        let records = try await self.campaigns(id, spelled: spelled)
        var changed = 0
        for record in records {
            let name = record.variant.map { "variant \($0) (campaign \(record.id.uuidString.lowercased()))" } ?? "campaign \(spelled)"
            var result = PartResult(name: name, isPart: record.variant != nil, outcome: try await self.postgres(change, record, records))
            if case .failure(let refusal) = result.outcome, !result.isPart {
                throw CampaignControlError("\(name) \(refusal)")
            }
            if case .success = result.outcome {
                changed += 1
                do {
                    try await self.redis(change, record, records)
                } catch {
                    result.redisError = error
                }
            }
            report(result)
        }
        if changed == 0 { throw CampaignControlError("no variant of split test \(spelled) \(change.whenNone)") }
    }

    /// Puts the campaign's dead shards (given up after too many claims) back in its queue; a failed
    /// campaign runs again. Redis first: a retry that stops half way leaves the campaign failed,
    /// and can be run again.
    /// - Returns: the shards put back, and the campaign's state now.
    public func retry(_ id: UUID, spelled: String? = nil) async throws -> (shards: Int, state: CampaignState) {
        let spelled = spelled ?? id.uuidString.lowercased()
        guard let record = try await self.store.campaign(id) else { throw CampaignControlError("no campaign \(spelled)") }
        let shards = try await self.queue.retryDeadShards(campaign: id)
        guard try await self.store.retry(id) else {
            throw CampaignControlError(
                "campaign \(spelled) is \(record.state.rawValue); only a failed, running or paused campaign can be retried"
            )
        }
        return (shards, record.state == .failed ? .running : record.state)
    }

    /// The campaigns the id names: the campaign, or a split test's variants.
    private func campaigns(_ id: UUID, spelled: String) async throws -> [CampaignRecord] {
        if let record = try await self.store.campaign(id) { return [record] }
        let variants = try await self.store.variants(of: id)
        guard !variants.isEmpty else { throw CampaignControlError("no campaign \(spelled) (nor a split test of that id)") }
        return variants
    }

    private func postgres(_ change: Change, _ record: CampaignRecord, _ all: [CampaignRecord]) async throws -> Result<String, CampaignControlError> {
        switch change {
        case .setRate(let rate):
            let limit = Self.share(of: rate, for: record, among: all)
            guard record.kind == .campaign, try await self.store.setRateLimit(record.id, to: limit) else {
                return .failure(CampaignControlError("is \(record.state.rawValue); only a campaign that has not ended can be throttled"))
            }
            return .success(": \(limit.map { "at most \($0) notifications a second" } ?? "no rate limit")")
        case .pause: return try await self.move(record, to: .paused, from: [.running])
        case .resume: return try await self.move(record, to: .running, from: [.paused])
        // Cancelling again is allowed: it tells Redis once more.
        case .cancel: return try await self.move(record, to: .cancelled, from: [.running, .paused, .pending, .scheduled, .failed, .cancelled])
        }
    }

    private func move(_ record: CampaignRecord, to state: CampaignState, from allowed: [CampaignState]) async throws -> Result<String, CampaignControlError> {
        try await self.store.setState(record.id, to: state, from: allowed)
            ? .success(" \(state.rawValue)")
            : .failure(CampaignControlError("is \(record.state.rawValue); it cannot become \(state.rawValue)"))
    }

    private func redis(_ change: Change, _ record: CampaignRecord, _ all: [CampaignRecord]) async throws {
        switch change {
        case .setRate(let rate): try await self.queue.setRateLimit(campaign: record.id, Self.share(of: rate, for: record, among: all))
        case .pause: try await self.queue.setStatus(campaign: record.id, .paused)
        case .resume: try await self.queue.setStatus(campaign: record.id, .running)
        case .cancel: try await self.queue.setStatus(campaign: record.id, .cancelled)
        }
    }

    /// `record`'s share of a launch's `rate`: split between the parts that start together (all of
    /// them but for `--local-time`) in proportion to their audiences.
    static func share(of rate: Int?, for record: CampaignRecord, among all: [CampaignRecord]) -> Int? {
        let together = all.filter { $0.startsAt == record.startsAt }
        let total = together.reduce(0) { $0 + $1.total }
        return rate.map { together.count == 1 || total == 0 ? $0 : max(1, Int(Double($0) * Double(record.total) / Double(total))) }
    }
}

extension CampaignControl.Change {
    /// The end of "no variant of split test … ", when no part could change.
    fileprivate var whenNone: String {
        switch self {
        case .pause: "could become paused"
        case .resume: "could become running"
        case .cancel: "could become cancelled"
        case .setRate: "has not ended"
        }
    }
}

/// Why a campaign could not be controlled: one sentence for the operator.
public struct CampaignControlError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
