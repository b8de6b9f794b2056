import ArgumentParser
import PushFleetCore

/// What is sent, for `launch` and `notify` alike: the topic, the payload and APNs' headers, and
/// the protocol whose limits they are checked against.
struct NotificationOptions: ParsableArguments {
    @Option(help: "The APNs topic: the app's bundle ID, plus the push type's suffix for those that have one (com.example.app.voip for voip).")
    var topic: String

    @Option(help: "The payload: JSON text, or @FILE. (`launch --variant` gives one per variant instead.)")
    var payload: String?

    @Option(help: "production or sandbox. (default: production)", transform: APNsEnvironment.option("--environment"))
    var environment: APNsEnvironment = .production

    @Option(help: "apns-push-type: alert, background, voip, …")
    var pushType: String = "alert"

    @Option(help: "10, 5 or 1.")
    var priority: Int = 10

    @Option(help: "Epoch seconds after which APNs may drop the notification; 0 = don't store.")
    var expiration: Int = 0

    @Option(help: "apns-collapse-id, so a re-send shows once (at most 64 bytes).")
    var collapseId: String?

    @Option(help: "http2 or binary: the payload limit and token size to check against. (default: http2)", transform: DeliveryProtocol.option("--protocol"))
    var `protocol`: DeliveryProtocol = .http2

    func validate() throws {
        guard !self.topic.isEmpty else { throw ValidationError("--topic must not be empty") }
        guard [10, 5, 1].contains(self.priority) else { throw ValidationError("--priority is 10, 5 or 1") }
        if let collapse = self.collapseId, collapse.utf8.count > 64 { throw ValidationError("--collapse-id is \(collapse.utf8.count) bytes; APNs allows 64") }
        if self.protocol == .http2 {
            guard APNsPushType.all.contains(self.pushType) else {
                throw ValidationError("--push-type \(self.pushType) is not one of \(APNsPushType.all.sorted().joined(separator: ", "))")
            }
            // APNs rejects every notification of such a campaign, and the answer
            // (DeviceTokenNotForTopic) would quarantine every token of the audience.
            if let mismatch = APNsPushType.mismatch(topic: self.topic, pushType: self.pushType) {
                throw ValidationError("--topic and --push-type do not match: \(mismatch)")
            }
        }
    }

    /// The token size the protocol requires (32 bytes for the binary one), or nil for any.
    var requiredTokenSize: Int? { self.protocol == .binary ? DeviceToken.binaryProtocolByteCount : nil }

    /// The format payloads are checked against: the protocol's limit.
    var payloadFormat: PayloadFormat { self.protocol == .binary ? .binaryFrame : .http2(pushType: self.pushType) }

    /// What is sent with `payload` (read and checked already), and how.
    func definition(payload: Payload) -> CampaignDefinition {
        CampaignDefinition(
            topic: self.topic, environment: self.environment, payload: payload.bytes, pushType: self.pushType,
            priority: self.priority, expiration: self.expiration, collapseID: self.collapseId
        )
    }

    /// The payload, read and checked against the protocol's limit.
    func loadPayload() throws -> Payload {
        guard let payload = self.payload else { throw ValidationError("give --payload JSON or --payload @FILE") }
        return try PayloadOption.load(payload, format: self.payloadFormat)
    }
}
