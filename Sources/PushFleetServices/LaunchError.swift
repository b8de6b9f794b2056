import Foundation
import PushFleetCore
import PushFleetPostgres

/// Why a launch was refused. Messages that concern a token file are prefixed with its place by the
/// token source; these are the launcher's own.
public struct LaunchError: Error, CustomStringConvertible {
    public let message: String
    /// The id is taken by something else (another kind, topic or environment): nothing was changed.
    public var isConflict = false
    public var description: String { self.message }

    init(message: String, isConflict: Bool = false) {
        self.message = message
        self.isConflict = isConflict
    }

    static func idInUse(_ id: UUID, by existing: CampaignRecord) -> Self {
        Self(
            message: "id \(id.uuidString.lowercased()) is taken by a \(existing.kind.rawValue) for \(existing.topic) (\(existing.environment)); "
                + "nothing was sent: use another id",
            isConflict: true
        )
    }

    static func wrongTokenSize(_ size: Int, required: Int) -> Self {
        Self(message: "a token is \(size) bytes (\(size * 2) hex digits); the binary protocol requires \(required) bytes (\(required * 2) hex digits)")
    }

    static func audienceDiffers(_ id: UUID, recorded: Int, read: Int) -> Self {
        Self(
            message: "campaign \(id.uuidString.lowercased()) was launched before with another audience (\(recorded) tokens recorded, "
                + "\(read) read now); launch it with the same tokens, or under another --campaign-id"
        )
    }

    static func noDevices(_ audience: String, topic: String, environment: APNsEnvironment) -> Self {
        Self(message: "\(audience) has no active device for topic \(topic) (\(environment)); nothing was sent")
    }

    static func tooManyDevices(_ count: Int, maximum: Int) -> Self {
        Self(message: "the notification names \(count) tokens; at most \(maximum) go in one notification, launch a campaign for more")
    }

    static func rateLimitOutOfRange(_ rate: Int) -> Self {
        Self(message: "a rate limit is 1 to 100,000,000 notifications a second, not \(rate); nothing was created")
    }

    static func startInThePast(_ startsAt: Date, now: Date) -> Self {
        Self(
            message: "the start time \(startsAt.formatted(.iso8601)) is \(Int(now.timeIntervalSince(startsAt))) s in the past; "
                + "give a time to come, or none to start at once; nothing was created"
        )
    }

    static func badVariants(_ message: String) -> Self {
        Self(message: message + "; nothing was created")
    }

    static func emptyVariant(_ name: String, audience: Int) -> Self {
        Self(message: "variant \(name) gets none of the audience's \(audience) tokens; give it more weight or the test more recipients; nothing was created")
    }

    static func splitDiffers(_ id: UUID, variant: String) -> Self {
        Self(
            message: "split test \(id.uuidString.lowercased()) was launched before with other variants, weights or audience "
                + "(its variant \(variant) does not match); launch it again as it was, or under another --campaign-id; nothing was created",
            isConflict: true
        )
    }

    static func emptyAudience() -> Self {
        Self(message: "the audience has no tokens")
    }
}
