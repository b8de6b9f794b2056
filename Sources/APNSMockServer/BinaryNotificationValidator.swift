import APNSWire
import NIOCore
import PushFleetCore

/// The binary gateway's verdict on one notification, in the order APNs checked.
///
/// Statuses: 2 no token, 5 token not 32 bytes, 4 no payload, 7 payload over the format's limit
/// (256 bytes for commands 0 and 1, 2048 for command 2), 8 a token the simulator was told is
/// invalid. Problems the protocol has no status for (payload not a JSON object, priority other
/// than 5 or 10, priority 10 on a push with only `content-available`) get 1, *ProcessingError*.
struct BinaryNotificationValidator {
    enum Verdict: Equatable {
        case accepted(fingerprint: UInt64, unregistered: DeviceToken?)
        case rejected(BinaryStatus)
    }

    private let refusedTokens: RefusedTokens
    /// A campaign sends the same payload bytes to every token: check them once.
    private var lastPayload: ByteBuffer? = nil
    private var lastPayloadIsObject = false
    private var lastPayloadIsContentAvailableOnly = false

    init(refusedTokens: RefusedTokens) {
        self.refusedTokens = refusedTokens
    }

    mutating func validate(_ notification: BinaryInboundNotification) -> Verdict {
        guard let token = notification.token, token.readableBytes > 0 else { return .rejected(.missingDeviceToken) }
        guard token.readableBytes == DeviceToken.binaryProtocolByteCount else { return .rejected(.invalidTokenSize) }
        guard let payload = notification.payload, payload.readableBytes > 0 else { return .rejected(.missingPayload) }
        let limit = notification.command == 2 ? PayloadFormat.binaryFrame.maximumByteCount : PayloadFormat.binaryLegacy.maximumByteCount
        guard payload.readableBytes <= limit else { return .rejected(.invalidPayloadSize) }
        let priority = notification.priority ?? 10
        guard priority == 10 || priority == 5 else { return .rejected(.processingError) }
        self.inspect(payload)
        guard self.lastPayloadIsObject else { return .rejected(.processingError) }
        guard !(priority == 10 && self.lastPayloadIsContentAvailableOnly) else { return .rejected(.processingError) }

        let fingerprint = token.withUnsafeReadableBytes(TokenFingerprint.of)
        guard !self.refusedTokens.isEmpty else { return .accepted(fingerprint: fingerprint, unregistered: nil) }
        let deviceToken = try! token.withUnsafeReadableBytes { try DeviceToken(bytes: $0) }  // 32 bytes: cannot fail
        switch self.refusedTokens.refusal(of: deviceToken, fingerprint: fingerprint) {
        case .invalid: return .rejected(.invalidToken)
        case .unregistered: return .accepted(fingerprint: fingerprint, unregistered: deviceToken)
        // The binary protocol has no status for a token of another topic.
        case .otherTopic, nil: return .accepted(fingerprint: fingerprint, unregistered: nil)
        }
    }

    private mutating func inspect(_ payload: ByteBuffer) {
        if payload == self.lastPayload { return }
        self.lastPayload = payload
        guard let value = try? JSONParser.parse(payload.readableBytesView), case .object = value else {
            self.lastPayloadIsObject = false
            return
        }
        self.lastPayloadIsObject = true
        if case .object(let members) = value, members.count == 1, case .object(let aps)? = value["aps"] {
            self.lastPayloadIsContentAvailableOnly = aps.count == 1 && aps[0].key == "content-available"
        } else {
            self.lastPayloadIsContentAvailableOnly = false
        }
    }
}
