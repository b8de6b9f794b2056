public import Foundation
public import PushFleetCore

/// A device as an app registers it: its token, whose phone it is, and when the app learnt the token.
public struct DeviceRegistration: Sendable, Hashable {
    public var token: DeviceToken
    /// The app's bundle id, the APNs topic.
    public var topic: String
    /// `production` or `sandbox`.
    public var environment: String
    /// The user the device belongs to: 1 to 200 bytes of UTF-8, created if new.
    public var user: String
    /// `ios`, `ipados`, `macos`, `watchos`, `tvos` or `visionos`, or `nil` when the app did not say.
    public var platform: String?
    /// When the device obtained the token (or the app last saw it). A later registration wins the
    /// device; one earlier than an APNs verdict on the token does not revive it.
    public var registeredAt: Date

    public init(token: DeviceToken, topic: String, environment: String, user: String, platform: String? = nil, registeredAt: Date) {
        self.token = token
        self.topic = topic
        self.environment = environment
        self.user = user
        self.platform = platform
        self.registeredAt = registeredAt
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
