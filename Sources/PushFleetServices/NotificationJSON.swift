import Foundation
import PushFleetCore
public import PushFleetPostgres

/// A notification and its per-device outcomes as one JSON object: what `pushfleet notify --wait
/// --json` prints and `GET /v1/notifications/{id}` answers.
public enum NotificationJSON {
    public static func render(_ report: NotificationReport) -> String {
        PushFleetJSON.encode(Notification(report: report))
    }

    /// The object: the notification's fields, its counts by status, and its devices.
    struct Notification: Encodable {
        let report: NotificationReport

        enum CodingKeys: String, CodingKey {
            case id, state, topic, environment, audience, total, accepted, rejected, pending, resent
            case createdAt = "created_at"
            case finishedAt = "finished_at"
            case devices
        }

        func encode(to encoder: any Encoder) throws {
            let r = self.report.record
            let devices = self.report.devices
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(r.id.uuidString.lowercased(), forKey: .id)
            try container.encode(r.state.rawValue, forKey: .state)
            try container.encode(r.topic, forKey: .topic)
            try container.encode(r.environment.rawValue, forKey: .environment)
            try container.encode(self.report.audience, forKey: .audience)
            try container.encode(r.total, forKey: .total)
            try container.encode(devices.count { $0.status == .accepted }, forKey: .accepted)
            try container.encode(devices.count { $0.status == .rejected }, forKey: .rejected)
            try container.encode(devices.count { $0.status == .pending }, forKey: .pending)
            try container.encode(r.resent, forKey: .resent)
            try container.encode(StatusReport.timestamp(r.createdAt), forKey: .createdAt)
            try container.encode(r.finishedAt.map(StatusReport.timestamp), forKey: .finishedAt)
            try container.encode(devices.map(Device.init), forKey: .devices)
        }
    }

    /// One device's outcome; what it lacks is `null`.
    struct Device: Encodable {
        let outcome: DeviceOutcome

        enum CodingKeys: String, CodingKey {
            case token, user, status, reason
            case apnsTimestamp = "apns_timestamp"
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.outcome.token.hexString, forKey: .token)
            try container.encode(self.outcome.user, forKey: .user)
            try container.encode(self.outcome.status.rawValue, forKey: .status)
            try container.encode(self.outcome.reason, forKey: .reason)
            try container.encode(self.outcome.apnsTimestampMilliseconds, forKey: .apnsTimestamp)
        }
    }
}
