/// What became of one notification a sender was given, known by the tag it was given with.
///
/// It is the one type an outcome has from the sender's answer to the shard run's checkpoint:
/// both protocols' senders report it, the worker's slot routes it to the run whose tag it bears,
/// and the run counts it (or, for a refusal, pauses the campaign).
public enum DeliveryOutcome: Hashable, Sendable {
    /// APNs took the notification.
    case accepted(tag: UInt64)
    /// APNs refused it, and the refusal is the token's final outcome: over HTTP/2 a reason about
    /// the token or the notification; over the binary protocol every error-response status (the
    /// binary sender does not tell the provider's apart).
    case rejected(tag: UInt64, Rejection)
    /// APNs refused it for the provider's or its own sake (credentials, topic, an outage that
    /// outlasted the retries): not the token's outcome. The notification stays unsent.
    case refused(tag: UInt64, token: DeviceToken, ProviderRefusal)

    /// The final outcome of a notification that got no answer on any of its attempts (`reason`:
    /// ``RejectionReason/streamReset`` or ``RejectionReason/connectionLost``), by whether APNs
    /// answered others since its first miss, as both protocols' senders decide it:
    /// - yes: the gateway works and this one never gets an answer (a header it will not take, a
    ///   request that makes it drop the connection): rejected alone, the token unharmed. Pausing
    ///   the campaign instead would resume it into the same request, again and again.
    /// - no: the gateway answers nothing (it hangs, it drops every connection): refused as an
    ///   outage, which pauses a campaign until APNs heals. Nothing is lost.
    public static func unanswered(tag: UInt64, token: DeviceToken, _ reason: RejectionReason, othersAnswered: Bool) -> Self {
        othersAnswered
            ? .rejected(tag: tag, Rejection(token: token, reason: reason))
            : .refused(tag: tag, token: token, ProviderRefusal(reason: reason, status: 0, isOutage: true))
    }

    /// The tag the notification was given by its sender's caller.
    public var tag: UInt64 {
        switch self {
        case .accepted(let tag), .rejected(let tag, _), .refused(let tag, _, _): return tag
        }
    }
}

/// An answer APNs would give every token alike: the provider's credentials or topic are wrong, or
/// APNs itself is failing. A campaign that gets one pauses.
public struct ProviderRefusal: Hashable, Sendable, CustomStringConvertible {
    /// APNs' reason (`InvalidProviderToken`, `TopicDisallowed`, `ServiceUnavailable`, …).
    public var reason: RejectionReason
    /// The HTTP/2 `:status` of the answer; 0 when no answer came (``RejectionReason/streamReset``,
    /// ``RejectionReason/connectionLost``).
    public var status: Int
    /// APNs itself failed (5xx, 429 past the retries): it heals without anyone changing anything.
    /// Otherwise only an operator can put it right.
    public var isOutage: Bool
    /// What went wrong, for people, when no answer came: the gateway and its error
    /// (`127.0.0.1:2197 sent TLS alert TLSV1_ALERT_UNKNOWN_CA`).
    public var detail: String?

    public init(reason: RejectionReason, status: Int, isOutage: Bool, detail: String? = nil) {
        self.reason = reason
        self.status = status
        self.isOutage = isOutage
        self.detail = detail
    }

    /// `InvalidProviderToken (HTTP 403)`; `StreamReset (no HTTP answer)`;
    /// `TLSFailure (no HTTP answer: api.push.apple.com:443 sent TLS alert …)`.
    public var description: String {
        guard self.status == 0 else { return "\(self.reason) (HTTP \(self.status))" }
        return "\(self.reason) (no HTTP answer" + (self.detail.map { ": \($0))" } ?? ")")
    }
}
