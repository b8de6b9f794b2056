import PushFleetCore
public import Foundation
public import PushFleetPostgres

/// A campaign's progress as `pushfleet status` prints it: text for people, JSON for tools.
public struct StatusReport: Sendable, Encodable {
    public let record: CampaignRecord
    /// Settled notifications per second since the campaign started (until it finished).
    public let rate: Double
    /// Seconds left at ``rate``, if it is running.
    public let etaSeconds: Double?

    public init(record: CampaignRecord, now: Date = Date()) {
        self.record = record
        let settled = record.accepted + record.rejected.values.reduce(0, +)
        let end = record.finishedAt ?? now
        let elapsed = record.startedAt.map { end.timeIntervalSince($0) } ?? 0
        self.rate = elapsed > 0 ? Double(settled) / elapsed : 0
        self.etaSeconds = record.finishedAt == nil && self.rate > 0 ? Double(record.pending) / self.rate : nil
    }

    public var settled: Int { self.record.accepted + self.record.rejected.values.reduce(0, +) }

    /// One JSON object with the fields of the design's `status --json`.
    public var json: String { PushFleetJSON.encode(self) }

    public var text: String {
        let r = self.record
        let rejected = r.rejected.isEmpty ? "0" : "\(r.rejected.values.reduce(0, +)) (" + r.rejected.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"
        var lines = [
            "campaign  \(r.id.uuidString.lowercased())  \(r.topic) (\(r.environment))"
                + (r.variant.map { "  variant \($0) of split test \(r.splitID?.uuidString.lowercased() ?? "?")" } ?? ""),
            "state     \(r.state.rawValue)" + (r.stateReason.map { ": \($0)" } ?? "")
                + (r.state == .scheduled ? r.startsAt.map { "; starts at \(Self.timestamp($0))" } ?? "" : "")
                + (r.autoResumeAt.map { "; resumes by itself at \(Self.timestamp($0))" } ?? ""),
            "total     \(r.total)\(r.duplicatesDropped > 0 ? "  (\(r.duplicatesDropped) duplicates dropped)" : "")",
            "accepted  \(r.accepted)",
            "rejected  \(rejected)",
            "pending   \(r.pending)",
            "resent    \(r.resent)",
        ]
        if r.retried > 0 { lines.append("retried   \(r.retried)") }
        if r.cancelled > 0 { lines.append("cancelled \(r.cancelled)") }
        if !r.deadShards.isEmpty {
            lines.append("dead      \(r.deadShards.count) shard\(r.deadShards.count == 1 ? "" : "s"); `pushfleet campaign retry \(r.id.uuidString.lowercased())` puts them back")
        }
        lines.append(
            "rate      \(Int(self.rate))/s" + (r.rateLimit.map { " (limit \($0)/s)" } ?? "")
                + (self.etaSeconds.map { "  ETA \(Int($0.rounded()))s" } ?? "")
        )
        return lines.joined(separator: "\n")
    }

    /// `date` in ISO 8601, as every JSON object of PushFleet writes times.
    public static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}

extension StatusReport {
    /// The keys of ``json``, as the design names them.
    enum CodingKeys: String, CodingKey {
        case id, state, topic, environment, total, accepted, rejected, pending, resent, retried, cancelled
        case duplicatesDropped = "duplicates_dropped"
        case shards
        case shardsDone = "shards_done"
        case deadShards = "dead_shards"
        case reason
        case resumesAt = "resumes_at"
        case rate
        case rateLimit = "rate_limit"
        case startsAt = "starts_at"
        case splitID = "split_id"
        case variant
        case etaSeconds = "eta_seconds"
        case createdAt = "created_at"
        case startedAt = "started_at"
        case finishedAt = "finished_at"
    }

    /// The fields of ``json``; what a campaign lacks is `null`. Rate and ETA to a tenth.
    public func encode(to encoder: any Encoder) throws {
        let r = self.record
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(r.id.uuidString.lowercased(), forKey: .id)
        try container.encode(r.state.rawValue, forKey: .state)
        try container.encode(r.topic, forKey: .topic)
        try container.encode(r.environment.rawValue, forKey: .environment)
        try container.encode(r.total, forKey: .total)
        try container.encode(r.accepted, forKey: .accepted)
        try container.encode(r.rejected, forKey: .rejected)
        try container.encode(r.pending, forKey: .pending)
        try container.encode(r.resent, forKey: .resent)
        try container.encode(r.retried, forKey: .retried)
        try container.encode(r.cancelled, forKey: .cancelled)
        try container.encode(r.duplicatesDropped, forKey: .duplicatesDropped)
        try container.encode(r.shardCount, forKey: .shards)
        try container.encode(r.doneShards, forKey: .shardsDone)
        try container.encode(r.deadShards, forKey: .deadShards)
        try container.encode(r.stateReason, forKey: .reason)
        try container.encode(r.autoResumeAt.map(Self.timestamp), forKey: .resumesAt)
        try container.encode(PushFleetJSON.rounded(self.rate, places: 1), forKey: .rate)
        try container.encode(r.rateLimit, forKey: .rateLimit)
        try container.encode(r.startsAt.map(Self.timestamp), forKey: .startsAt)
        try container.encode(r.splitID.map { $0.uuidString.lowercased() }, forKey: .splitID)
        try container.encode(r.variant, forKey: .variant)
        try container.encode(self.etaSeconds.map { PushFleetJSON.rounded($0, places: 1) }, forKey: .etaSeconds)
        try container.encode(Self.timestamp(r.createdAt), forKey: .createdAt)
        try container.encode(r.startedAt.map(Self.timestamp), forKey: .startedAt)
        try container.encode(r.finishedAt.map(Self.timestamp), forKey: .finishedAt)
    }
}
