public import NIOCore
public import NIOHPACK
public import PushFleetCore

/// What every notification of one campaign shares on HTTP/2: the topic, the `apns-*` headers and the
/// payload. Built once per campaign; every ``HTTP2Notification`` holds a reference to it. A
/// personalized campaign's template (``perRecipient(topic:pushType:priority:expiration:collapseID:)``)
/// has no payload: each notification carries its own body, and `content-length` is left out (it is
/// optional in HTTP/2, where the DATA frames end the body).
///
/// The stable request headers are prepared here once, in the order they go on the wire, so that
/// HPACK indexes them: after the first request on a connection each costs one byte. Only `:path`
/// differs per request, and it is sent without indexing so it never fills the server's small
/// dynamic table.
public struct HTTP2NotificationTemplate: Hashable, Sendable {
    final class Storage: Sendable {
        let topic: String
        let pushType: String
        let priority: Int
        let expiration: Int64?
        let collapseID: String?
        /// Nil when each notification carries its own body.
        let payload: ByteBuffer?
        let pseudoHeaders: HPACKHeaders
        let headers: HPACKHeaders

        init(topic: String, pushType: String, priority: Int, expiration: Int64?, collapseID: String?, payload: ByteBuffer?) {
            self.topic = topic
            self.pushType = pushType
            self.priority = priority
            self.expiration = expiration
            self.collapseID = collapseID
            self.payload = payload
            self.pseudoHeaders = [":method": "POST", ":scheme": "https"]
            var headers = HPACKHeaders()
            headers.add(name: "apns-topic", value: topic)
            headers.add(name: "apns-push-type", value: pushType)
            headers.add(name: "apns-priority", value: String(priority))
            if let expiration { headers.add(name: "apns-expiration", value: String(expiration)) }
            if let collapseID { headers.add(name: "apns-collapse-id", value: collapseID) }
            if let payload { headers.add(name: "content-length", value: String(payload.readableBytes)) }
            self.headers = headers
        }
    }

    let storage: Storage

    /// - Parameters:
    ///   - topic: `apns-topic`, the bundle id plus the push type's suffix where it needs one.
    ///   - pushType: `apns-push-type`, e.g. `alert`, `background`, `voip`. Defaults to `alert`.
    ///   - priority: `apns-priority`: 10, 5 or 1. Defaults to 10.
    ///   - expiration: `apns-expiration`, epoch seconds; `0` means "do not store"; `nil` leaves the
    ///     header out (APNs' storage policy applies).
    ///   - collapseID: `apns-collapse-id`, at most 64 bytes.
    ///   - payload: the JSON payload's bytes, sent unchanged with every notification.
    public init(topic: String, pushType: String = "alert", priority: Int = 10, expiration: Int64? = nil, collapseID: String? = nil, payload: ByteBuffer) {
        self.storage = Storage(topic: topic, pushType: pushType, priority: priority, expiration: expiration, collapseID: collapseID, payload: payload)
    }

    /// The template of a personalized campaign: every ``HTTP2Notification`` made with it carries its
    /// own ``HTTP2Notification/body``.
    public static func perRecipient(topic: String, pushType: String = "alert", priority: Int = 10, expiration: Int64? = nil, collapseID: String? = nil) -> Self {
        Self(storage: Storage(topic: topic, pushType: pushType, priority: priority, expiration: expiration, collapseID: collapseID, payload: nil))
    }

    private init(storage: Storage) { self.storage = storage }

    /// The same with a checked ``Payload``.
    public init(topic: String, pushType: String = "alert", priority: Int = 10, expiration: Int64? = nil, collapseID: String? = nil, payload: Payload) {
        self.init(
            topic: topic, pushType: pushType, priority: priority, expiration: expiration, collapseID: collapseID,
            payload: ByteBuffer(bytes: payload.bytes)
        )
    }

    public var topic: String { self.storage.topic }
    public var pushType: String { self.storage.pushType }
    public var priority: Int { self.storage.priority }
    public var expiration: Int64? { self.storage.expiration }
    public var collapseID: String? { self.storage.collapseID }
    /// The payload; a copy shares the bytes (writing it as a DATA frame copies nothing). Empty for
    /// a template ``perRecipient(topic:pushType:priority:expiration:collapseID:)``.
    public var payload: ByteBuffer { self.storage.payload ?? ByteBuffer() }
    /// Whether each notification carries its own body (``HTTP2Notification/body``).
    public var isPerRecipient: Bool { self.storage.payload == nil }
    /// `:method` and `:scheme`; a request adds `:path` (see ``path(for:)``) and `:authority`.
    public var pseudoHeaders: HPACKHeaders { self.storage.pseudoHeaders }
    /// The regular headers every request of the campaign carries (`apns-*`, `content-length`);
    /// token authentication adds `authorization`.
    public var headers: HPACKHeaders { self.storage.headers }

    /// `/3/device/<lowercase hex token>`, built in one allocation.
    public static func path(for token: DeviceToken) -> String {
        token.withUnsafeBytes { raw in
            String(unsafeUninitializedCapacity: pathPrefix.count + raw.count * 2) { buffer in
                var index = 0
                for byte in pathPrefix {
                    buffer[index] = byte
                    index += 1
                }
                for byte in raw {
                    buffer[index] = hexDigits[Int(byte >> 4)]
                    buffer[index + 1] = hexDigits[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }

    /// Two templates are equal when they are the same template (built by the same call).
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.storage === rhs.storage }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self.storage)) }
}

/// `:path`'s prefix and the hex digits of the token after it; the request encoder writes the same path.
let pathPrefix: [UInt8] = Array("/3/device/".utf8)
let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

/// One notification for the HTTP/2 provider API, as a sender holds it: the token, the campaign's
/// template (shared by reference), and `tag`, the caller's own reference that never goes on the wire.
/// A personalized campaign's notification also carries its own rendered `body`.
public struct HTTP2Notification: Hashable, Sendable {
    public var token: DeviceToken
    public var tag: UInt64
    public var template: HTTP2NotificationTemplate
    /// This recipient's payload, for a template ``HTTP2NotificationTemplate/isPerRecipient``; nil
    /// sends the template's.
    public var body: ByteBuffer?

    public init(token: DeviceToken, tag: UInt64 = 0, template: HTTP2NotificationTemplate, body: ByteBuffer? = nil) {
        self.token = token
        self.tag = tag
        self.template = template
        self.body = body
    }

    /// A notification whose request carries `ownPayload` (a personalized campaign's rendering)
    /// in place of the template's payload.
    public init(token: DeviceToken, tag: UInt64 = 0, template: HTTP2NotificationTemplate, ownPayload: [UInt8]) {
        self.init(token: token, tag: tag, template: template, body: ByteBuffer(bytes: ownPayload))
    }

    /// The bytes the request's DATA carries.
    public var payload: ByteBuffer { self.body ?? self.template.payload }
}
