/// A token APNs refused, with its reason, as recorded by a checkpoint.
public struct Rejection: Hashable, Sendable {
    /// The refused token.
    public var token: DeviceToken
    /// APNs' reason (`BadDeviceToken`, `Unregistered`, `InvalidToken`, …).
    public var reason: RejectionReason
    /// When APNs says the token stopped being valid (HTTP/2 410, feedback), in milliseconds since 1970.
    public var timestampMilliseconds: Int64?

    public init(token: DeviceToken, reason: RejectionReason, timestampMilliseconds: Int64? = nil) {
        self.token = token
        self.reason = reason
        self.timestampMilliseconds = timestampMilliseconds
    }
}
