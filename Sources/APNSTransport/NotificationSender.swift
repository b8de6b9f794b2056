public import APNSWire
public import PushFleetCore

/// A notification a sender can report on: it carries the tag its outcome is reported by.
public protocol TaggedNotification: Sendable {
    var tag: UInt64 { get }
}

extension BinaryNotification: TaggedNotification {}
extension HTTP2Notification: TaggedNotification {}

/// A sender of notifications to APNs, whichever protocol it speaks: ``BinarySender`` or
/// ``HTTP2Sender``. A worker drives either through this seam alone.
///
/// Notifications are queued by ``send(_:)``, which suspends while the sender holds as many as it
/// may; each one's fate is reported once on ``events``, by its tag, unless it was taken back
/// (``withdraw(where:)``) or the sender was shut down first.
public protocol NotificationSender: Sendable {
    associatedtype Notification: TaggedNotification

    /// Outcomes, in batches, in the order they became known. Finishes after ``shutdown()``.
    var events: AsyncStream<[DeliveryOutcome]> { get }

    /// Notifications the sender should have on hand, beyond what its configuration asks for, to
    /// keep its connection busy; `nil` when the configuration's number is all it takes.
    var notificationsWanted: Int? { get }

    /// Queues notifications for sending. Suspends while the sender's queue is full.
    /// - Throws: ``TransportError`` if the sender was shut down.
    func send(_ notifications: [Notification]) async throws

    /// Writes nothing at or after `deadline` until a later one is set; `nil` never stops. A worker
    /// sets it to the end of its shard lease, by its own clock.
    func setWriteDeadline(_ deadline: ContinuousClock.Instant?)

    /// Takes back every notification for which `predicate` holds that was never written, and
    /// returns them in the order they were queued: no outcome will be reported for them.
    func withdraw(where predicate: @escaping @Sendable (Notification) -> Bool) async -> [Notification]

    /// Returns once every queued notification has its outcome.
    func flush() async

    /// What the sender counted since it was made.
    func totals() async -> SenderTotals

    /// Closes the connection(s) and returns every notification without an outcome. ``events``
    /// finishes.
    func shutdown() async -> [Notification]
}

/// What a sender counted, in the terms both protocols share.
public struct SenderTotals: Hashable, Sendable, Codable {
    /// Connections opened to APNs.
    public var connectionsOpened = 0
    /// Requests (HTTP/2) or proof rounds (binary) that got no answer in time; each costs its
    /// connection.
    public var requestTimeouts = 0
    /// Notifications written again that may have been delivered.
    public var resent = 0
    /// Requests repeated because APNs asked for it (HTTP/2 429, 500, 503).
    public var retried = 0

    public init() {}

    /// The counts of two senders together.
    public static func + (a: Self, b: Self) -> Self {
        var sum = a
        sum.connectionsOpened += b.connectionsOpened
        sum.requestTimeouts += b.requestTimeouts
        sum.resent += b.resent
        sum.retried += b.retried
        return sum
    }

    enum CodingKeys: String, CodingKey {
        case connectionsOpened = "connections_opened", requestTimeouts = "request_timeouts", resent, retried
    }
}
