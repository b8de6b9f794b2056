public import NIOCore
public import PushFleetCore

/// APNs' final "no" to one notification: the HTTP status, APNs' `reason` string, and for 410 the
/// time APNs last knew the token valid.
public struct HTTP2Rejection: Hashable, Sendable, CustomStringConvertible {
    /// The `:status` of the answer: 400, 403, 404, 405, 410, 413, or 429/500/503 once retries ran out.
    public var status: Int
    /// APNs' own reason string, unknown ones included.
    public var reason: RejectionReason
    /// For 410: milliseconds since 1970 at which APNs confirmed the token was no longer valid for
    /// the topic. A token registered again after this time is live.
    public var timestamp: Int64?

    public init(status: Int, reason: RejectionReason, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
    }

    public var description: String { "\(self.status) \(self.reason)" + (self.timestamp.map { " since \($0)" } ?? "") }

    /// Whether the rejection is about the provider or APNs (credentials, topic, certificate, an
    /// outage, throttling that outlasted the retries) rather than about the device token: the same
    /// answer would come for every token, so it must pause a campaign, never count as a token's
    /// final outcome. Token-level: `BadDeviceToken`, `Unregistered`, `ExpiredToken`,
    /// `DeviceTokenNotForTopic`, `PayloadTooLarge` and the other 400s about the request's own fields.
    public var isProviderLevel: Bool {
        switch self.status {
        case 403, 404, 405, 429, 500...599: return true  // auth, path, method, throttling, APNs itself
        default: return self.reason.subject == .provider
        }
    }

    /// Whether APNs itself failed (a 5xx, or 429 past the retries) rather than refusing the
    /// provider's credentials or topic: it heals without anyone changing anything.
    public var isAPNsFailure: Bool {
        self.status == 429 || (500...599).contains(self.status)
    }

    /// The outcome of the notification to `token` tagged `tag`: the token's rejection, or a
    /// refusal of the provider (``isProviderLevel``).
    public func outcome(token: DeviceToken, tag: UInt64) -> DeliveryOutcome {
        guard self.isProviderLevel else {
            return .rejected(tag: tag, Rejection(token: token, reason: self.reason, timestampMilliseconds: self.timestamp))
        }
        return .refused(tag: tag, token: token, ProviderRefusal(reason: self.reason, status: self.status, isOutage: self.isAPNsFailure))
    }
}

/// What to do about one answer from APNs. Apple states no retry rules; these are PushFleet's:
///
/// | answer | verdict |
/// |---|---|
/// | 200 | ``accepted(apnsID:)`` |
/// | 400, 404, 405, 410, 413, 403 other than below | ``rejected(_:)``: final, APNs' reason |
/// | 403 `InvalidProviderToken` | ``rejected(_:)``: the key, key id or team is wrong; no retry cures it |
/// | 403 `ExpiredProviderToken` | ``renewProviderToken(_:)``: renew the shared token, replace the connection (APNs keeps answering "expired" on it), retry |
/// | 403 `UnrelatedKeyIdInToken` | ``replaceConnection(_:)``: APNs asks for a new connection; retry there |
/// | 429 `TooManyProviderTokenUpdates` | ``replaceConnection(_:)``: the connection is unusable for a while; retry elsewhere |
/// | 429 `TooManyRequests` (or no reason) | ``retryTokenLater(_:)``: back off this device token only |
/// | 500, 503, any other 5xx | ``retry(_:)``: exponential backoff with jitter, bounded; repeated 500s also replace the connection |
/// | anything else | ``rejected(_:)`` |
public enum HTTP2Verdict: Hashable, Sendable {
    case accepted(apnsID: String?)
    case rejected(HTTP2Rejection)
    case retryTokenLater(HTTP2Rejection)
    case retry(HTTP2Rejection)
    case renewProviderToken(HTTP2Rejection)
    case replaceConnection(HTTP2Rejection)

    /// Classifies an answer.
    /// - Parameters:
    ///   - status: the `:status` header.
    ///   - body: the DATA of the answer, if any: `{"reason": "...", "timestamp": 1234}`.
    ///   - apnsID: the `apns-id` header, if the caller read it.
    public static func classify(status: Int, body: ByteBuffer?, apnsID: String? = nil) -> Self {
        if status == 200 { return .accepted(apnsID: apnsID) }
        let rejection = HTTP2Rejection(status: status, body: body)
        switch (status, rejection.reason) {
        case (403, .expiredProviderToken): return .renewProviderToken(rejection)
        case (403, .unrelatedKeyIdInToken), (429, .tooManyProviderTokenUpdates): return .replaceConnection(rejection)
        case (429, _): return .retryTokenLater(rejection)
        case (500...599, _): return .retry(rejection)
        default: return .rejected(rejection)
        }
    }
}

extension HTTP2Rejection {
    /// Reads APNs' JSON error body. A missing or unreadable reason becomes `Status<code>`, so every
    /// rejection still names something.
    public init(status: Int, body: ByteBuffer?) {
        if let body, let compact = body.withUnsafeReadableBytes(Self.compactBody) {
            self.init(status: status, reason: compact.reason, timestamp: compact.timestamp)
            return
        }
        var reason: RejectionReason?
        var timestamp: Int64?
        if let body, body.readableBytes > 0, let json = try? JSONParser.parse(body.readableBytesView) {
            if case .string(let text) = json["reason"], !text.isEmpty { reason = RejectionReason(text) }
            if case .number(let text) = json["timestamp"] { timestamp = Int64(text) }
        }
        self.init(status: status, reason: reason ?? RejectionReason("Status\(status)"), timestamp: timestamp)
    }

    /// APNs' error body exactly as APNs writes it, `{"reason":"BadDeviceToken"}` or
    /// `{"reason":"Unregistered","timestamp":1700000000000}`, read without building a JSON tree
    /// (a stale audience sends one in five). `nil` for any other body (spaces, escapes, other keys
    /// or order, an empty reason, a timestamp that is not plain digits), which the JSON parser then
    /// reads; both read the same body alike.
    package static func compactBody(_ bytes: UnsafeRawBufferPointer) -> (reason: RejectionReason, timestamp: Int64?)? {
        let head: StaticString = #"{"reason":""#
        let middle: StaticString = #"","timestamp":"#
        var index = 0
        func skip(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard bytes.count - index >= count,
                UnsafeBufferPointer(start: literal.utf8Start, count: count).elementsEqual(bytes[index..<index + count])
            else { return false }
            index += count
            return true
        }
        guard skip(head) else { return nil }
        let reasonStart = index
        // Printable ASCII other than the quote and the backslash: what needs no unescaping.
        while index < bytes.count, bytes[index] >= 0x20, bytes[index] < 0x7F, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") {
            index += 1
        }
        let reasonEnd = index
        guard reasonEnd > reasonStart, index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
        let reason = RejectionReason(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[reasonStart..<reasonEnd]), as: UTF8.self))
        if bytes.count - index == 2, bytes[index + 1] == UInt8(ascii: "}") { return (reason, nil) }
        guard skip(middle) else { return nil }
        var timestamp: Int64 = 0
        var digits = 0
        // Plain digits as JSON writes a number (no leading zero), at most 18: no overflow to check.
        if index + 1 < bytes.count, bytes[index] == UInt8(ascii: "0"), bytes[index + 1] != UInt8(ascii: "}") { return nil }
        while index < bytes.count, digits < 18, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            timestamp = timestamp * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
            digits += 1
            index += 1
        }
        guard digits > 0, bytes.count - index == 1, bytes[index] == UInt8(ascii: "}") else { return nil }
        return (reason, timestamp)
    }

    /// The reason in a GOAWAY frame's debug data (`{"reason":"Shutdown"}`), if it carries one.
    public static func goAwayReason(_ debugData: ByteBuffer?) -> RejectionReason? {
        guard let debugData, debugData.readableBytes > 0, let json = try? JSONParser.parse(debugData.readableBytesView),
            case .string(let text) = json["reason"], !text.isEmpty
        else { return nil }
        return RejectionReason(text)
    }
}
