public import PushFleetCore

/// A registry token's standing. Stored as its raw value in `device_tokens.status`.
public enum TokenStatus: String, Sendable, CaseIterable {
    /// Sent to by `launch --from-registry`.
    case active
    /// APNs called the token invalid (binary status 8, `InvalidToken`).
    case invalid
    /// The app was removed or the token expired (`Unregistered`, `ExpiredToken`, the feedback service).
    case unregistered
    /// APNs refused the token for this topic or environment (`BadDeviceToken`, `DeviceTokenNotForTopic`):
    /// often a sandbox token in a production audience, so it is set aside rather than declared dead.
    case quarantined

    /// The status an APNs rejection reason implies for the token, or `nil` when the reason says nothing
    /// about the token itself (payload, topic, certificate or server problems), or nothing that
    /// changes its standing (`MissingDeviceToken`, `InvalidTokenSize`: the request's, not the token's).
    public init?(rejectionReason reason: RejectionReason) {
        switch reason {
        case .badDeviceToken, .deviceTokenNotForTopic: self = .quarantined
        case .invalidToken: self = .invalid
        case .unregistered, .expiredToken: self = .unregistered
        default: return nil
        }
    }
}
