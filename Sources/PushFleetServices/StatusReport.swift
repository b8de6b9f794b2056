import PushFleetCore
public import Foundation
public import PushFleetPostgres

/// A campaign's progress as `pushfleet status` prints it: text for people, JSON for tools.
public struct StatusReport: Sendable {
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
    public var json: String {
        let r = self.record
        let rejected = Self.json(rejected: r.rejected)
        let fields: [(String, String)] = [
            ("id", Self.quote(r.id.uuidString.lowercased())),
            ("state", Self.quote(r.state.rawValue)),
            ("topic", Self.quote(r.topic)),
            ("environment", Self.quote(r.environment.rawValue)),
            ("total", "\(r.total)"),
            ("accepted", "\(r.accepted)"),
            ("rejected", rejected),
            ("pending", "\(r.pending)"),
            ("resent", "\(r.resent)"),
            ("retried", "\(r.retried)"),
            ("cancelled", "\(r.cancelled)"),
            ("duplicates_dropped", "\(r.duplicatesDropped)"),
            ("shards", "\(r.shardCount)"),
            ("shards_done", "\(r.doneShards)"),
            ("dead_shards", "[" + r.deadShards.map(String.init).joined(separator: ",") + "]"),
            ("reason", r.stateReason.map(Self.quote) ?? "null"),
            ("resumes_at", r.autoResumeAt.map { Self.quote(Self.timestamp($0)) } ?? "null"),
            ("rate", String(format: "%.1f", self.rate)),
            ("rate_limit", r.rateLimit.map(String.init) ?? "null"),
            ("starts_at", r.startsAt.map { Self.quote(Self.timestamp($0)) } ?? "null"),
            ("split_id", r.splitID.map { Self.quote($0.uuidString.lowercased()) } ?? "null"),
            ("variant", r.variant.map(Self.quote) ?? "null"),
            ("eta_seconds", self.etaSeconds.map { String(format: "%.1f", $0) } ?? "null"),
            ("created_at", Self.quote(Self.timestamp(r.createdAt))),
            ("started_at", r.startedAt.map { Self.quote(Self.timestamp($0)) } ?? "null"),
            ("finished_at", r.finishedAt.map { Self.quote(Self.timestamp($0)) } ?? "null"),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }

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

    /// Rejections by reason as a JSON object, reasons in order.
    static func json(rejected: [String: Int]) -> String {
        "{" + rejected.sorted { $0.key < $1.key }.map { "\(Self.quote($0.key)):\($0.value)" }.joined(separator: ",") + "}"
    }

    /// `text` as a JSON string literal.
    public static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// `date` in ISO 8601, as every JSON object of PushFleet writes times.
    public static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }
}
