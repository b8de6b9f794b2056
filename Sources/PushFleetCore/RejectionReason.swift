/// Why APNs refused a notification, in APNs' own words: the `reason` of an HTTP/2 error answer, or
/// the name of a binary error-response status (`InvalidToken` for status 8). A reason PushFleet does
/// not know yet is kept as APNs wrote it, and reported so.
///
/// It is the one type a reason has from the sender's answer to the Postgres row: the rejection a
/// checkpoint records, the coordinator's counters, a token's registry status.
public struct RejectionReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { self.rawValue }

    // HTTP/2 400
    public static let badCollapseId = Self("BadCollapseId")
    public static let badDeviceToken = Self("BadDeviceToken")
    public static let badExpirationDate = Self("BadExpirationDate")
    public static let badMessageId = Self("BadMessageId")
    public static let badPriority = Self("BadPriority")
    public static let badTopic = Self("BadTopic")
    public static let deviceTokenNotForTopic = Self("DeviceTokenNotForTopic")
    public static let duplicateHeaders = Self("DuplicateHeaders")
    public static let idleTimeout = Self("IdleTimeout")
    public static let invalidPushType = Self("InvalidPushType")
    public static let missingDeviceToken = Self("MissingDeviceToken")
    public static let missingTopic = Self("MissingTopic")
    public static let payloadEmpty = Self("PayloadEmpty")
    public static let topicDisallowed = Self("TopicDisallowed")
    // HTTP/2 403
    public static let badCertificate = Self("BadCertificate")
    public static let badCertificateEnvironment = Self("BadCertificateEnvironment")
    public static let expiredProviderToken = Self("ExpiredProviderToken")
    public static let forbidden = Self("Forbidden")
    public static let invalidProviderToken = Self("InvalidProviderToken")
    public static let missingProviderToken = Self("MissingProviderToken")
    public static let unrelatedKeyIdInToken = Self("UnrelatedKeyIdInToken")
    // HTTP/2 404, 405
    public static let badPath = Self("BadPath")
    public static let methodNotAllowed = Self("MethodNotAllowed")
    // HTTP/2 410
    public static let expiredToken = Self("ExpiredToken")
    public static let unregistered = Self("Unregistered")
    // HTTP/2 413
    public static let payloadTooLarge = Self("PayloadTooLarge")
    // HTTP/2 429
    public static let tooManyProviderTokenUpdates = Self("TooManyProviderTokenUpdates")
    public static let tooManyRequests = Self("TooManyRequests")
    // HTTP/2 500, 503; binary status 10
    public static let internalServerError = Self("InternalServerError")
    public static let serviceUnavailable = Self("ServiceUnavailable")
    public static let shutdown = Self("Shutdown")
    // The binary protocol's statuses that HTTP/2 has no reason for (2 and 3 are `MissingDeviceToken`
    // and `MissingTopic` above).
    public static let noErrors = Self("NoErrors")
    public static let processingError = Self("ProcessingError")
    public static let missingPayload = Self("MissingPayload")
    public static let invalidTokenSize = Self("InvalidTokenSize")
    public static let invalidTopicSize = Self("InvalidTopicSize")
    public static let invalidPayloadSize = Self("InvalidPayloadSize")
    public static let invalidToken = Self("InvalidToken")
    public static let protocolError = Self("ProtocolError")
    public static let unknown = Self("Unknown")
    // PushFleet's own, for a notification that got no answer on any of its attempts (HTTP/2):
    // its stream was reset, or its connection ended with it in flight.
    public static let streamReset = Self("StreamReset")
    public static let connectionLost = Self("ConnectionLost")
    // PushFleet's own, for the notifications waiting when connections kept failing (both
    // protocols): TLS failed (a certificate refused, by either side), or the gateway could not be
    // reached at all.
    public static let tlsFailure = Self("TLSFailure")
    public static let cannotConnect = Self("CannotConnect")

    /// What a reason is about, and so what may follow from it.
    public enum Subject: Hashable, Sendable {
        /// The device token: it is the token's outcome, and may change its status in the registry.
        case token
        /// The notification's own fields (payload, headers): the token's outcome, the token unharmed.
        case notification
        /// The provider: its credentials, topic or request path. The same answer would come for every
        /// token, so it pauses a campaign and is no token's outcome.
        case provider
        /// APNs itself (an outage, throttling): heals without anyone changing anything.
        case apns
        /// A reason PushFleet does not know; what it is about is left to the answer's status.
        case unknown
    }

    /// Whether the reason says no answer came to any attempt (``DeliveryOutcome/unanswered(tag:token:_:othersAnswered:)``),
    /// so that APNs may have delivered the notification after all.
    public var isUnanswered: Bool { self == .streamReset || self == .connectionLost }

    /// What the reason is about.
    public var subject: Subject {
        switch self {
        case .badDeviceToken, .deviceTokenNotForTopic, .unregistered, .expiredToken, .missingDeviceToken, .invalidToken, .invalidTokenSize:
            return .token
        case .badCollapseId, .badExpirationDate, .badMessageId, .badPriority, .duplicateHeaders, .payloadEmpty, .payloadTooLarge,
            .missingPayload, .invalidPayloadSize, .protocolError, .streamReset, .connectionLost:
            return .notification
        case .badTopic, .missingTopic, .topicDisallowed, .invalidPushType, .badCertificate, .badCertificateEnvironment,
            .expiredProviderToken, .forbidden, .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken,
            .tooManyProviderTokenUpdates, .badPath, .methodNotAllowed, .invalidTopicSize, .tlsFailure:
            return .provider
        case .internalServerError, .serviceUnavailable, .shutdown, .tooManyRequests, .idleTimeout, .processingError, .cannotConnect:
            return .apns
        default:
            return .unknown
        }
    }
}
