import CoreMetrics
import PushFleetCore

/// What the senders of a process count, through swift-metrics: the process chooses the backend
/// (PushFleet's commands export Prometheus text); without one, each call costs next to nothing.
/// Names follow Prometheus conventions; no token or payload is ever a label.
final class TransportMetrics: Sendable {
    /// Made on first use, after the process has bootstrapped its metrics backend.
    static let http2 = TransportMetrics(protocol: .http2)
    static let binary = TransportMetrics(protocol: .binary)

    /// Connections to APNs established and not yet closed.
    let connections: Meter
    /// Attempts to connect that failed (TCP, TLS, ALPN).
    let connectFailures: Counter
    /// Connections given up because an answer or a PING's did not come in time.
    let requestTimeouts: Counter
    /// HTTP/2: the time from a request's write to its answer's end, whatever the status.
    let answerDuration: CoreMetrics.Timer
    /// HTTP/2: GOAWAY frames received.
    let goAways: Counter
    /// HTTP/2 answers with status 200.
    let accepted: Counter

    private init(protocol deliveryProtocol: DeliveryProtocol) {
        let dimensions = [("protocol", deliveryProtocol.rawValue)]
        self.connections = Meter(label: "pushfleet_apns_connections", dimensions: dimensions)
        self.connectFailures = Counter(label: "pushfleet_apns_connect_failures_total", dimensions: dimensions)
        self.requestTimeouts = Counter(label: "pushfleet_apns_request_timeouts_total", dimensions: dimensions)
        self.answerDuration = CoreMetrics.Timer(label: "pushfleet_apns_answer_duration_seconds")
        self.goAways = Counter(label: "pushfleet_apns_goaways_total")
        self.accepted = Counter(label: "pushfleet_apns_answers_total", dimensions: [("status", "200")])
    }

    /// The counter of HTTP/2 answers with `status` (other than 200), or of binary error responses
    /// with `status`.
    func answers(status: Int) -> Counter {
        Counter(label: "pushfleet_apns_answers_total", dimensions: [("status", Self.statusLabel(status))])
    }

    /// Provider tokens (JWTs) signed: one at start, then one per renewal.
    static let providerTokensSigned = Counter(label: "pushfleet_apns_provider_tokens_signed_total")

    /// Binary error-response packets received, by status (8 InvalidToken, 10 Shutdown…).
    static func binaryErrorResponses(status: UInt8) -> Counter {
        Counter(label: "pushfleet_apns_binary_error_responses_total", dimensions: [("status", String(status))])
    }

    /// A status a gateway could send is any three digits; anything else is one label, so a
    /// broken peer cannot grow the metric without bound.
    static func statusLabel(_ status: Int) -> String {
        (100...599).contains(status) ? String(status) : "other"
    }
}
