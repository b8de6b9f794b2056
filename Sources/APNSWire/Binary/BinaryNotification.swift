public import PushFleetCore

/// One notification for the binary provider protocol, as a sender holds it.
///
/// The payload is shared by reference between every notification of a campaign; the token is inline.
/// `tag` is the caller's own reference (a shard index, say) and never goes on the wire.
public struct BinaryNotification: Hashable, Sendable {
    public var token: DeviceToken
    public var payload: Payload
    /// Epoch seconds after which APNs may discard the notification; 0 means "do not store".
    public var expiration: UInt32
    /// 10 (immediately) or 5 (power-conserving).
    public var priority: UInt8
    public var tag: UInt64

    public init(token: DeviceToken, payload: Payload, expiration: UInt32 = 0, priority: UInt8 = 10, tag: UInt64 = 0) {
        self.token = token
        self.payload = payload
        self.expiration = expiration
        self.priority = priority
        self.tag = tag
    }
}
