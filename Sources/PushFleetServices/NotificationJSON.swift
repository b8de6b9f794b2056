import Foundation
import PushFleetCore
public import PushFleetPostgres

/// A notification and its per-device outcomes as one JSON object: what `pushfleet notify --wait
/// --json` prints and `GET /v1/notifications/{id}` answers.
public enum NotificationJSON {
    public static func render(_ report: NotificationReport) -> String {
        let r = report.record
        let quote = StatusReport.quote
        let devices = report.devices.map { device in
            let fields: [(String, String)] = [
                ("token", quote(device.token.hexString)),
                ("user", device.user.map(quote) ?? "null"),
                ("status", quote(device.status.rawValue)),
                ("reason", device.reason.map(quote) ?? "null"),
                ("apns_timestamp", device.apnsTimestampMilliseconds.map { "\($0)" } ?? "null"),
            ]
            return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
        }
        let fields: [(String, String)] = [
            ("id", quote(r.id.uuidString.lowercased())),
            ("state", quote(r.state.rawValue)),
            ("topic", quote(r.topic)),
            ("environment", quote(r.environment.rawValue)),
            ("audience", report.audience.map(quote) ?? "null"),
            ("total", "\(r.total)"),
            ("accepted", "\(report.devices.count { $0.status == .accepted })"),
            ("rejected", "\(report.devices.count { $0.status == .rejected })"),
            ("pending", "\(report.devices.count { $0.status == .pending })"),
            ("resent", "\(r.resent)"),
            ("created_at", quote(StatusReport.timestamp(r.createdAt))),
            ("finished_at", r.finishedAt.map { quote(StatusReport.timestamp($0)) } ?? "null"),
            ("devices", "[" + devices.joined(separator: ",") + "]"),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}
