public import PushFleetCore

/// A status code of the binary provider protocol's error-response packet (command 8).
///
/// Codes unknown to PushFleet are kept, not dropped: ``reason`` then reads `Status<n>`.
public struct BinaryStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let noErrors = Self(rawValue: 0)
    public static let processingError = Self(rawValue: 1)
    public static let missingDeviceToken = Self(rawValue: 2)
    public static let missingTopic = Self(rawValue: 3)
    public static let missingPayload = Self(rawValue: 4)
    public static let invalidTokenSize = Self(rawValue: 5)
    public static let invalidTopicSize = Self(rawValue: 6)
    public static let invalidPayloadSize = Self(rawValue: 7)
    public static let invalidToken = Self(rawValue: 8)
    /// The gateway is closing the connection, e.g. for maintenance. The identifier names the *last
    /// notification accepted*, not a failed one.
    public static let shutdown = Self(rawValue: 10)
    /// The gateway could not parse the notification.
    public static let protocolError = Self(rawValue: 128)
    public static let unknown = Self(rawValue: 255)

    /// The reason PushFleet reports for this status (`InvalidToken`, `Shutdown`, …); an unknown
    /// status reads `Status<n>`.
    public var reason: RejectionReason {
        switch self.rawValue {
        case 0: return .noErrors
        case 1: return .processingError
        case 2: return .missingDeviceToken
        case 3: return .missingTopic
        case 4: return .missingPayload
        case 5: return .invalidTokenSize
        case 6: return .invalidTopicSize
        case 7: return .invalidPayloadSize
        case 8: return .invalidToken
        case 10: return .shutdown
        case 128: return .protocolError
        case 255: return .unknown
        default: return RejectionReason("Status\(self.rawValue)")
        }
    }

    /// Whether the identifier of an error response with this status names the last *accepted*
    /// notification (status 10) rather than the rejected one.
    public var identifiesLastAccepted: Bool { self == .shutdown || self == .noErrors }

    public var description: String { "\(self.reason) (\(self.rawValue))" }
}
