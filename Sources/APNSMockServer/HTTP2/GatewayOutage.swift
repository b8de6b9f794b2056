import APNSWire
import Synchronization
import PushFleetCore

/// An APNs outage, switched on and off while the simulator runs: while on, the HTTP/2 gateway
/// answers every request with the outage's status (`503 ServiceUnavailable`, `500
/// InternalServerError` or `429 TooManyRequests`) and delivers nothing. In-process through
/// ``MockAPNSServer/outage``; from outside through the admin endpoint (`POST /outage?status=503`,
/// `DELETE /outage`).
public final class GatewayOutage: Sendable {
    /// The statuses an outage can answer with.
    public static let statuses: Set<Int> = [429, 500, 503]

    private let value = Atomic<Int>(0)

    public init() {}

    /// The status every request is answered with, or nil when APNs is healthy.
    public var status: Int? {
        let status = self.value.load(ordering: .relaxed)
        return status == 0 ? nil : status
    }

    /// Starts an outage answering `status` (one of ``statuses``), or ends it with nil.
    /// - Returns: false, changing nothing, for another status.
    @discardableResult
    public func set(_ status: Int?) -> Bool {
        guard let status else {
            self.value.store(0, ordering: .relaxed)
            return true
        }
        guard Self.statuses.contains(status) else { return false }
        self.value.store(status, ordering: .relaxed)
        return true
    }

    /// The answer a request gets now, if APNs is down.
    var answer: (status: Int, reason: RejectionReason)? {
        switch self.status {
        case 429?: return (429, .tooManyRequests)
        case 500?: return (500, .internalServerError)
        case 503?: return (503, .serviceUnavailable)
        default: return nil
        }
    }
}
