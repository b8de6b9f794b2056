public import Foundation
public import PushFleetCore

/// A device as an app registers it: its token, whose phone it is, and when the app learnt the token.
public struct DeviceRegistration: Sendable, Hashable {
    public var token: DeviceToken
    /// The app's bundle id, the APNs topic.
    public var topic: String
    /// `production` or `sandbox`.
    public var environment: APNsEnvironment
    /// The user the device belongs to: 1 to 200 bytes of UTF-8, created if new.
    public var user: String
    /// `ios`, `ipados`, `macos`, `watchos`, `tvos` or `visionos`, or `nil` when the app did not say.
    public var platform: String?
    /// When the device obtained the token (or the app last saw it). A later registration wins the
    /// device; one earlier than an APNs verdict on the token does not revive it.
    public var registeredAt: Date
    /// The phone's locale (`fr_FR`, `pt-BR`), for localized campaigns; nil keeps the one registered before.
    public var locale: String?
    /// The phone's IANA time zone (`Europe/Paris`), for local-time campaigns; nil keeps the one
    /// registered before.
    public var timeZone: String?

    public init(
        token: DeviceToken, topic: String, environment: APNsEnvironment, user: String, platform: String? = nil, registeredAt: Date,
        locale: String? = nil, timeZone: String? = nil
    ) {
        self.token = token
        self.topic = topic
        self.environment = environment
        self.user = user
        self.platform = platform
        self.registeredAt = registeredAt
        self.locale = locale
        self.timeZone = timeZone
    }

    /// Nil if `locale` may be registered (1 to 35 letters, digits, `-` and `_`), else why not.
    public static func problem(locale: String) -> String? {
        guard (1...35).contains(locale.utf8.count), locale.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            return "locale '\(locale.prefix(40))' is not 1 to 35 letters, digits, '-' and '_' (such as fr_FR or pt-BR)"
        }
        return nil
    }

    /// Nil if `timeZone` names an IANA time zone, else why not.
    public static func problem(timeZone: String) -> String? {
        TimeZone(identifier: timeZone) == nil ? "time zone '\(timeZone.prefix(40))' is not an IANA time zone such as Europe/Paris" : nil
    }

    /// The platforms a registration may name.
    public static let platforms: Set<String> = ["ios", "ipados", "macos", "watchos", "tvos", "visionos"]
}

/// What ``CampaignStore/registerDevice(_:)`` left in the registry.
public struct RegisteredDevice: Sendable, Hashable {
    /// The token's standing now: `active`, or what APNs said of it when the registration is older
    /// than that verdict.
    public var status: TokenStatus
    /// The user who holds the device now. A registration older than the one the registry holds
    /// leaves the device with its owner.
    public var owner: String
    /// The user who held the device before, when this registration moved it to another.
    public var previousOwner: String?

    public init(status: TokenStatus, owner: String, previousOwner: String? = nil) {
        self.status = status
        self.owner = owner
        self.previousOwner = previousOwner
    }
}

/// Whose devices a notification goes to.
public enum DeviceAudience: Sendable, Hashable {
    /// Every active device of one user.
    case user(String)
    /// Every active device of every user sharing a group (a doorbell, a household).
    case group(String)
}
