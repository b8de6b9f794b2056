import Foundation
public import PushFleetCore

/// What became of a notification at one device, as Postgres holds it (about one coordinator
/// interval behind the workers).
public struct DeviceOutcome: Sendable, Hashable {
    public enum Status: String, Sendable, Hashable {
        /// No answer folded yet.
        case pending
        /// APNs accepted it.
        case accepted
        /// APNs refused it for this device; ``DeviceOutcome/reason`` says why.
        case rejected
        /// Never sent: the notification was cancelled first.
        case cancelled
        /// No outcome, and none will come: the notification failed (its shard was given up on
        /// after repeated crashes of the workers holding it).
        case failed
    }

    public var token: DeviceToken
    /// The device's owner in the registry now, if it has one.
    public var user: String?
    public var status: Status
    /// APNs' reason for a rejection (`Unregistered`, `BadDeviceToken`, …).
    public var reason: String?
    /// For `Unregistered`: when APNs last knew the token valid, in milliseconds since 1970.
    public var apnsTimestampMilliseconds: Int64?
}

/// A notification and its per-device outcomes.
public struct NotificationReport: Sendable, Hashable {
    public var record: CampaignRecord
    /// Whom it was asked for: `user:U`, `group:G` or `tokens`.
    public var audience: String?
    /// One per device, in the order they were sent.
    public var devices: [DeviceOutcome]
}
