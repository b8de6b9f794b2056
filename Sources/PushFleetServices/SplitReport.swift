public import Foundation
public import PushFleetPostgres

/// The progress of a launch in parts (a split test, localized payloads, local-time delivery) as
/// `pushfleet status ID` prints it: each part's campaign side by side, and their sum.
public struct SplitReport: Sendable, Encodable {
    public let id: UUID
    /// One per part (a split test's variant), by name.
    public let variants: [StatusReport]

    public init(id: UUID, variants: [CampaignRecord], now: Date = Date()) {
        self.id = id
        self.variants = variants.map { StatusReport(record: $0, now: now) }
    }

    public var total: Int { self.variants.reduce(0) { $0 + $1.record.total } }
    public var accepted: Int { self.variants.reduce(0) { $0 + $1.record.accepted } }
    public var rejected: [String: Int] { self.variants.reduce(into: [:]) { sum, v in sum.merge(v.record.rejected, uniquingKeysWith: +) } }
    public var pending: Int { self.variants.reduce(0) { $0 + $1.record.pending } }
    public var resent: Int { self.variants.reduce(0) { $0 + $1.record.resent } }
    public var cancelled: Int { self.variants.reduce(0) { $0 + $1.record.cancelled } }

    /// The split test's state: ended when every variant has (completed only if each did; else
    /// failed if one failed, else cancelled); otherwise the most active variant's state.
    public var state: CampaignState {
        let states = self.variants.map(\.record.state)
        if states.allSatisfy(\.isFinal) {
            return states.allSatisfy { $0 == .completed } ? .completed : states.contains(.failed) ? .failed : .cancelled
        }
        for state in [CampaignState.running, .paused, .scheduled, .pending] where states.contains(state) { return state }
        return .running
    }

    /// One JSON object: the sums, `"split": true`, and each variant's `status --json` object.
    public var json: String { PushFleetJSON.encode(self) }

    public var text: String {
        func row(_ cells: [String]) -> String {
            // Name, campaign and state to the left, the counts to the right.
            let widths = [max(12, self.variants.map { ($0.record.variant ?? "").count }.max() ?? 0), 36, 10, 10, 10, 10, 10, 20]
            return zip(cells, widths).enumerated().map { index, cell in
                let pad = String(repeating: " ", count: max(0, cell.1 - cell.0.count))
                return (2...5).contains(index) ? pad + cell.0 : cell.0 + pad
            }.joined(separator: " ").replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        let scheduled = self.variants.contains { $0.record.startsAt != nil }
        var lines = [
            "launch \(self.id.uuidString.lowercased()) in \(self.variants.count) parts  \(self.variants.first.map { "\($0.record.topic) (\($0.record.environment))" } ?? "")",
            "state      \(self.state.rawValue)",
            row(["part", "campaign", "total", "accepted", "rejected", "pending", "state"] + (scheduled ? ["starts"] : [])),
        ]
        for v in self.variants {
            let r = v.record
            lines.append(row([
                r.variant ?? "?", r.id.uuidString.lowercased(), "\(r.total)", "\(r.accepted)", "\(r.rejected.values.reduce(0, +))",
                "\(r.pending)", r.state.rawValue,
            ] + (scheduled ? [r.startsAt.map(StatusReport.timestamp) ?? ""] : [])))
        }
        lines.append(row(["all", "", "\(self.total)", "\(self.accepted)", "\(self.rejected.values.reduce(0, +))", "\(self.pending)", ""]))
        return lines.joined(separator: "\n")
    }
}

extension SplitReport {
    enum CodingKeys: String, CodingKey {
        case id, split, state, total, accepted, rejected, pending, resent, cancelled, variants
    }

    /// The fields of ``json``.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.id.uuidString.lowercased(), forKey: .id)
        try container.encode(true, forKey: .split)
        try container.encode(self.state.rawValue, forKey: .state)
        try container.encode(self.total, forKey: .total)
        try container.encode(self.accepted, forKey: .accepted)
        try container.encode(self.rejected, forKey: .rejected)
        try container.encode(self.pending, forKey: .pending)
        try container.encode(self.resent, forKey: .resent)
        try container.encode(self.cancelled, forKey: .cancelled)
        try container.encode(self.variants, forKey: .variants)
    }
}
