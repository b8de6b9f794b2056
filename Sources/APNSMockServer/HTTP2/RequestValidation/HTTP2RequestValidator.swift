package import APNSWire
package import PushFleetCore

/// The HTTP/2 gateway's verdict on one request, checked in this order (the first failing check
/// answers):
///
/// | # | check | answer |
/// |---|---|---|
/// | 1 | the connection was already answered `ExpiredProviderToken` | 403 `ExpiredProviderToken` |
/// | 2 | `:method` is not `POST` | 405 `MethodNotAllowed` |
/// | 3 | `:path` does not start with `/3/device/` | 404 `BadPath` |
/// | 4 | `authorization` or an `apns-*` header appears twice | 400 `DuplicateHeaders` |
/// | 5 | no verified client certificate: the provider token (see ``ProviderTokenAuthenticator``) | 403 / 429 |
/// | 6 | nothing after `/3/device/` | 400 `MissingDeviceToken` |
/// | 7 | the token is not an even number of hex digits (at most 255 bytes) | 400 `BadDeviceToken` |
/// | 8 | no `apns-topic`, or an empty one | 400 `MissingTopic` |
/// | 9 | the topic has a character other than letters, digits, `.`, `-`, `_` | 400 `BadTopic` |
/// | 10 | `apns-push-type` is present and not one of Apple's ten | 400 `InvalidPushType` |
/// | 11 | the topic ends in a push type's suffix (`.voip`, …) and `apns-push-type` is not that type | 400 `InvalidPushType` |
/// | 12 | `apns-push-type` needs a suffix (`voip` needs `.voip`, …) and the topic does not end in it | 400 `DeviceTokenNotForTopic` |
/// | 13 | the topic is nothing but a suffix | 400 `BadTopic` |
/// | 14 | allowed topics are configured and neither the topic nor the topic less its suffix (the app) is one of them | 400 `TopicDisallowed` |
/// | 15 | `apns-priority` is present and not 10, 5 or 1 | 400 `BadPriority` |
/// | 16 | `apns-expiration` is present and not an integer | 400 `BadExpirationDate` |
/// | 17 | `apns-collapse-id` is over 64 bytes | 400 `BadCollapseId` |
/// | 18 | `apns-id` is present and not a canonical 8-4-4-4-12 UUID | 400 `BadMessageId` |
/// | 19 | empty body | 400 `PayloadEmpty` |
/// | 20 | body over 4096 bytes (5120 for `apns-push-type: voip`) | 413 `PayloadTooLarge` |
/// | 21 | the token is one of the configured invalid tokens | 400 `BadDeviceToken` |
/// | 22 | the token is one of the configured unregistered tokens | 410 `Unregistered` + `timestamp` |
/// | 23 | the token is one of the configured tokens of another topic | 400 `DeviceTokenNotForTopic` |
///
/// Whatever goes wrong with the request line comes first, authentication next (APNs learns the
/// team before it reads the notification), then the notification's own headers and body, and the
/// device token's state last, because only a well-formed notification reaches a device's record.
///
/// Rules 11 and 12 follow what APNs' users report: a `.voip` topic sent without `apns-push-type:
/// voip` is answered `InvalidPushType`, and `apns-push-type: voip` on the plain bundle ID
/// `DeviceTokenNotForTopic` (a VoIP token is registered for the `.voip` topic only).
package struct HTTP2RequestValidator {
    package enum Verdict: Equatable {
        case accepted(fingerprint: UInt64)
        case rejected(status: Int, reason: RejectionReason, timestamp: Int64?)
    }

    /// The largest body any push type may carry, in bytes.
    static let largestPayload = PayloadFormat.voip.maximumByteCount
    private static let devicePathPrefix = "/3/device/"

    private let refusedTokens: RefusedTokens
    private let allowedTopics: Set<String>?
    private var authenticator: ProviderTokenAuthenticator

    /// - Parameters:
    ///   - refusedTokens: invalid ones answered 400 `BadDeviceToken`, unregistered ones 410
    ///     `Unregistered` with a timestamp, other topics' 400 `DeviceTokenNotForTopic`.
    ///   - allowedTopics: apps (every push type's suffix allowed) or exact topics; `nil` allows any.
    ///   - keys: the provider-token keys by key id.
    package init(refusedTokens: RefusedTokens, allowedTopics: Set<String>?, keys: [String: MockAPNSProviderKey]) {
        self.refusedTokens = refusedTokens
        self.allowedTopics = allowedTopics
        self.authenticator = ProviderTokenAuthenticator(keys: keys)
    }

    /// The headers of one request that matter, read in one pass.
    package struct Request {
        var method: String? = nil
        var path: String? = nil
        var authorization: String? = nil
        var topic: String? = nil
        var pushType: String? = nil
        var priority: String? = nil
        var expiration: String? = nil
        var collapseID: String? = nil
        var apnsID: String? = nil
        var hasDuplicates = false

        package init(fields: [HTTP2HeaderField]) {
            var otherAPNSHeaders: Set<String> = []
            for field in fields {
                let value = field.value
                switch field.name {
                case ":method": self.method = value
                case ":path": self.path = value
                case "authorization": Self.set(&self.authorization, value, &self.hasDuplicates)
                case "apns-topic": Self.set(&self.topic, value, &self.hasDuplicates)
                case "apns-push-type": Self.set(&self.pushType, value, &self.hasDuplicates)
                case "apns-priority": Self.set(&self.priority, value, &self.hasDuplicates)
                case "apns-expiration": Self.set(&self.expiration, value, &self.hasDuplicates)
                case "apns-collapse-id": Self.set(&self.collapseID, value, &self.hasDuplicates)
                case "apns-id": Self.set(&self.apnsID, value, &self.hasDuplicates)
                case let name where name.hasPrefix("apns-"):
                    if !otherAPNSHeaders.insert(name).inserted { self.hasDuplicates = true }
                default: break
                }
            }
        }

        private static func set(_ field: inout String?, _ value: String, _ duplicates: inout Bool) {
            if field != nil { duplicates = true }
            field = value
        }

        /// The request's `apns-id` if it is canonical; the answer echoes it.
        var validAPNSID: String? {
            guard let apnsID = self.apnsID, HTTP2RequestValidator.isCanonicalUUID(apnsID) else { return nil }
            return apnsID
        }
    }

    /// A request's device token, read from its `:path` and looked up among the refused tokens
    /// ahead of its verdict.
    package struct PreparedToken {
        let token: DeviceToken
        let fingerprint: UInt64
        /// What ``RefusedTokens/refusal(of:fingerprint:)`` says of it.
        var refusal: RefusedTokens.Refusal?
    }

    /// Reads ahead the device token of each request in `events`, one slot per event (nil for any
    /// other event, for a `:path` without a token, and for every event when the simulator refuses
    /// no token), and looks them all up among the refused tokens together
    /// (``RefusedTokens/refusals(fingerprints:token:found:)``): their waits for memory then overlap, where one
    /// verdict after another would wait for each in turn. The fuzz target FuzzHTTP2Request checks
    /// that a verdict given its token read ahead is the verdict given without it.
    package func prepareTokens(_ events: [HTTP2ServerFramer.Event], into tokens: inout [PreparedToken?]) {
        tokens.removeAll(keepingCapacity: true)
        guard !self.refusedTokens.isEmpty else {
            tokens.append(contentsOf: repeatElement(nil, count: events.count))
            return
        }
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: events.count) { fingerprints in
            for (index, event) in events.enumerated() {
                fingerprints[index] = 0
                guard case .headers(_, let fields, _) = event else {
                    tokens.append(nil)
                    continue
                }
                // The last `:path`, as ``Request`` keeps. Every request of a read passes here (when
                // any token is refused) and again through ``Request``: names are told apart by their
                // length first, which is read without a call.
                var path: String?
                for field in fields.indices where fields[field].name.utf8.count == 5 && fields[field].name == ":path" {
                    path = fields[field].value
                }
                guard let path, path.hasPrefix(Self.devicePathPrefix), let token = Self.deviceToken(afterPrefixOf: path) else {
                    tokens.append(nil)
                    continue
                }
                fingerprints[index] = token.fingerprint
                tokens.append(PreparedToken(token: token, fingerprint: fingerprints[index], refusal: nil))
            }
            self.refusedTokens.refusals(fingerprints: UnsafeBufferPointer(fingerprints), token: { tokens[$0]!.token }) { index, refusal in
                tokens[index]?.refusal = refusal
            }
        }
    }

    /// The token after `/3/device/` in a path that starts with it (the caller has checked), if
    /// that is an even number of hex digits (rule 7).
    private static func deviceToken(afterPrefixOf path: String) -> DeviceToken? {
        var path = path
        return path.withUTF8 { utf8 in
            DeviceToken(hexDigitsUTF8: UnsafeRawBufferPointer(UnsafeBufferPointer(rebasing: utf8[Self.devicePathPrefix.utf8.count...])))
        }
    }

    /// Whether a request on this connection was answered `ExpiredProviderToken`.
    var isWedged: Bool { self.authenticator.isWedged }

    /// Judges one complete request.
    /// - Parameters:
    ///   - prepared: its token and its refusal, as ``prepareTokens(_:into:)`` read them from these
    ///     fields and looked them up, if it did.
    ///   - certificateVerified: the connection presented a client certificate of the configured CA.
    ///   - authenticated: set to `true` if the request passed authentication.
    package mutating func validate(
        _ request: Request, prepared: PreparedToken? = nil, bodyBytes: Int, certificateVerified: Bool, now: Int64, authenticated: inout Bool
    ) -> Verdict {
        if self.authenticator.isWedged { return .rejected(status: 403, reason: .expiredProviderToken, timestamp: nil) }
        guard request.method == "POST" else { return .rejected(status: 405, reason: .methodNotAllowed, timestamp: nil) }
        guard let path = request.path, path.hasPrefix(Self.devicePathPrefix) else {
            return .rejected(status: 404, reason: .badPath, timestamp: nil)
        }
        guard !request.hasDuplicates else { return .rejected(status: 400, reason: .duplicateHeaders, timestamp: nil) }
        if !certificateVerified {
            switch self.authenticator.authenticate(authorization: request.authorization, now: now) {
            case .accepted: break
            case .rejected(let reason):
                let status = reason == .tooManyProviderTokenUpdates ? 429 : 403
                return .rejected(status: status, reason: reason, timestamp: nil)
            }
        }
        authenticated = true

        guard path.utf8.count > Self.devicePathPrefix.utf8.count else {
            return .rejected(status: 400, reason: .missingDeviceToken, timestamp: nil)
        }
        guard let token = prepared?.token ?? Self.deviceToken(afterPrefixOf: path) else {
            return .rejected(status: 400, reason: .badDeviceToken, timestamp: nil)
        }
        let fingerprint = prepared?.fingerprint ?? token.fingerprint
        guard let topic = request.topic, !topic.isEmpty else { return .rejected(status: 400, reason: .missingTopic, timestamp: nil) }
        guard topic.utf8.allSatisfy(Self.isTopicCharacter) else { return .rejected(status: 400, reason: .badTopic, timestamp: nil) }
        if let pushType = request.pushType, !APNsPushType.all.contains(pushType) {
            return .rejected(status: 400, reason: .invalidPushType, timestamp: nil)
        }
        let suffix = APNsPushType.suffixedPushType(of: topic)
        if let suffix, request.pushType != suffix.pushType {
            return .rejected(status: 400, reason: .invalidPushType, timestamp: nil)
        }
        if suffix == nil, let pushType = request.pushType, APNsPushType.topicSuffix(for: pushType) != nil {
            return .rejected(status: 400, reason: .deviceTokenNotForTopic, timestamp: nil)
        }
        let app = topic.dropLast(suffix?.suffix.count ?? 0)
        guard !app.isEmpty else { return .rejected(status: 400, reason: .badTopic, timestamp: nil) }
        if let allowed = self.allowedTopics, !allowed.contains(topic), !allowed.contains(String(app)) {
            return .rejected(status: 400, reason: .topicDisallowed, timestamp: nil)
        }
        if let priority = request.priority, priority != "10", priority != "5", priority != "1" {
            return .rejected(status: 400, reason: .badPriority, timestamp: nil)
        }
        if let expiration = request.expiration, Int64(expiration) == nil {
            return .rejected(status: 400, reason: .badExpirationDate, timestamp: nil)
        }
        if let collapseID = request.collapseID, collapseID.utf8.count > 64 {
            return .rejected(status: 400, reason: .badCollapseId, timestamp: nil)
        }
        if request.apnsID != nil, request.validAPNSID == nil {
            return .rejected(status: 400, reason: .badMessageId, timestamp: nil)
        }
        guard bodyBytes > 0 else { return .rejected(status: 400, reason: .payloadEmpty, timestamp: nil) }
        guard bodyBytes <= PayloadFormat.http2(pushType: request.pushType).maximumByteCount else {
            return .rejected(status: 413, reason: .payloadTooLarge, timestamp: nil)
        }
        let refusal =
            if let prepared { prepared.refusal } else { self.refusedTokens.refusal(of: token, fingerprint: fingerprint) }
        switch refusal {
        case .invalid: return .rejected(status: 400, reason: .badDeviceToken, timestamp: nil)
        case .unregistered: return .rejected(status: 410, reason: .unregistered, timestamp: now)
        case .otherTopic: return .rejected(status: 400, reason: .deviceTokenNotForTopic, timestamp: nil)
        case nil: return .accepted(fingerprint: fingerprint)
        }
    }

    // MARK: - Characters

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
        default: false
        }
    }

    private static func isTopicCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }

    /// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, hex digits in either case.
    static func isCanonicalUUID(_ text: String) -> Bool {
        var count = 0
        for byte in text.utf8 {
            let isDash = count == 8 || count == 13 || count == 18 || count == 23
            guard isDash ? byte == UInt8(ascii: "-") : Self.isHexDigit(byte) else { return false }
            count += 1
        }
        return count == 36
    }
}
