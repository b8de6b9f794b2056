public import APNSTransport
import APNSWire
public import Logging
import PushFleetCore
import PushFleetRedis

/// The fixed part of a campaign's notifications, prepared once per campaign for one protocol.
struct CampaignTemplate: Sendable {
    enum Wire: Sendable {
        case binary(payload: Payload, expiration: UInt32, priority: UInt8)
        case http2(HTTP2NotificationTemplate)
    }

    let wire: Wire
    /// A personalized campaign's payload template: each recipient's payload is rendered from the
    /// values its shard entry carries (``ShardWindow/values``).
    let personalization: PayloadTemplate?

    /// The payload of the recipient whose packed values are `values`. Values that do not fit the
    /// template (never, for a shard its launch wrote) give the fallbacks.
    func render(_ personalization: PayloadTemplate, _ values: [UInt8]) -> [UInt8] {
        personalization.render(packed: values) ?? personalization.render(Array(repeating: nil, count: personalization.fields.count))
    }
}

/// One slot's sender, whichever protocol it speaks, as the slot drives it.
protocol DeliveryChannel: Sendable {
    /// Hands `tokens` to the sender, tagged `firstTag`, `firstTag + 1`, …; suspends while the
    /// sender's queue is full. A personalized campaign's come with each recipient's packed values.
    func send(_ tokens: [DeviceToken], values: [[UInt8]]?, firstTag: UInt64, template: CampaignTemplate) async throws
    /// Outcomes, in batches, until the channel is shut down.
    var outcomes: AsyncStream<[DeliveryOutcome]> { get }
    /// Takes back the notifications tagged `runTag` (under ``SlotContext/runTagMask``) that were never
    /// written, and returns their tags: they get no outcome. Those written before stay.
    func withdraw(runTag: UInt64) async -> [UInt64]
    /// Stops writing at `deadline` until a later one is set (lease fencing).
    func setWriteDeadline(_ deadline: ContinuousClock.Instant?)
    /// What the channel's sender counted since the channel was made.
    func totals() async -> SenderTotals
    /// Closes the connection(s); unanswered notifications are dropped and the outcome stream ends.
    func shutdown() async
    /// Tokens the slot should keep on hand (in the shards it works) for its connection to stay
    /// busy, beyond ``WorkerService/Configuration/shardsPerConnection``; `nil` when that
    /// configured number of shards is all it takes.
    var tokensWanted: Int? { get }
}

/// How a worker sends: makes a slot's channel, and a campaign's template.
public struct DeliveryTransport: Sendable {
    let `protocol`: DeliveryProtocol
    /// Connections behind one channel: a slot of this transport counts for that many connections.
    let connectionsPerChannel: Int
    let makeChannel: @Sendable () throws -> any DeliveryChannel
    /// The channel of a worker's notification lane: one connection, opened at once and kept open
    /// where the protocol allows it.
    let makeLaneChannel: @Sendable () throws -> any DeliveryChannel
    let makeTemplate: @Sendable (CampaignDescriptor) throws -> CampaignTemplate

    /// The legacy binary protocol: one ``BinarySender`` (one connection) per slot.
    public static func binary(configuration: BinarySender.Configuration, loops: SenderLoops, logger: Logger) -> Self {
        let makeChannel: @Sendable (SenderLoops) -> any DeliveryChannel = { loops in
            SenderChannel(sender: BinarySender(configuration: configuration, on: loops, logger: logger))
        }
        return Self(
            protocol: .binary,
            connectionsPerChannel: 1,
            makeChannel: { makeChannel(loops) },
            // The binary gateway drops idle connections without a word, so the lane's connects on
            // its first notification, as a slot's does: the same channel, on the lanes' loop.
            makeLaneChannel: { makeChannel(.lane) },
            makeTemplate: { descriptor in
                CampaignTemplate(
                    wire: .binary(
                        payload: try Payload(jsonText: descriptor.definition.payload, format: .binaryFrame),
                        expiration: UInt32(clamping: descriptor.definition.expiration), priority: UInt8(clamping: descriptor.definition.priority)
                    ),
                    personalization: try descriptor.payloadTemplate()
                )
            }
        )
    }

    /// The HTTP/2 provider API: one slot whose ``HTTP2Sender`` keeps a pool of
    /// ``HTTP2Sender/Configuration/connections`` connections, opened a few seconds apart, and
    /// multiplexes every shard of the slot over them.
    public static func http2(configuration: HTTP2Sender.Configuration, loops: SenderLoops, logger: Logger) -> Self {
        Self(
            protocol: .http2,
            connectionsPerChannel: max(1, configuration.connections),
            makeChannel: { SenderChannel(sender: try HTTP2Sender(configuration: configuration, on: loops, logger: logger)) },
            makeLaneChannel: {
                var lane = configuration
                lane.connections = 1
                lane.keepsConnectionsOpen = true
                return SenderChannel(sender: try HTTP2Sender(configuration: lane, on: .lane, logger: logger))
            },
            makeTemplate: { descriptor in
                let d = descriptor.definition
                let payload = try Payload(jsonText: d.payload, format: .http2(pushType: d.pushType))
                let (topic, pushType, priority, expiration) = (d.topic, d.pushType, d.priority, Int64(d.expiration))
                guard let personalization = try descriptor.payloadTemplate() else {
                    let template = HTTP2NotificationTemplate(
                        topic: topic, pushType: pushType, priority: priority, expiration: expiration, collapseID: d.collapseID, payload: payload
                    )
                    return CampaignTemplate(wire: .http2(template), personalization: nil)
                }
                let template = HTTP2NotificationTemplate.perRecipient(
                    topic: topic, pushType: pushType, priority: priority, expiration: expiration, collapseID: d.collapseID
                )
                return CampaignTemplate(wire: .http2(template), personalization: personalization)
            }
        )
    }
}

extension CampaignDescriptor {
    /// A personalized campaign's payload template; nil for any other campaign, whatever its
    /// payload holds.
    /// - Throws: ``PayloadTemplateError`` when a personalized campaign's payload has no placeholder.
    func payloadTemplate() throws -> PayloadTemplate? {
        guard self.definition.personalized else { return nil }
        guard let template = try PayloadTemplate(self.definition.payload) else {
            throw PayloadTemplateError("the personalized campaign \(self.id)'s payload has no placeholder")
        }
        return template
    }
}

/// A notification a campaign's template makes for its recipients.
protocol CampaignNotification: TaggedNotification {
    /// The notifications to `tokens`, tagged `firstTag`, `firstTag + 1`, …; a personalized
    /// campaign's with each recipient's payload rendered from its packed `values`.
    static func make(_ tokens: [DeviceToken], values: [[UInt8]]?, firstTag: UInt64, template: CampaignTemplate) -> [Self]
}

extension BinaryNotification: CampaignNotification {
    static func make(_ tokens: [DeviceToken], values: [[UInt8]]?, firstTag: UInt64, template: CampaignTemplate) -> [Self] {
        guard case .binary(let payload, let expiration, let priority) = template.wire else {
            preconditionFailure("a binary channel was given a template of another protocol")
        }
        var notifications: [BinaryNotification] = []
        notifications.reserveCapacity(tokens.count)
        for (offset, token) in tokens.enumerated() {
            var own = payload
            if let personalization = template.personalization, let values {
                own = Payload(rendered: template.render(personalization, values[offset]), format: payload.format)
            }
            notifications.append(
                BinaryNotification(token: token, payload: own, expiration: expiration, priority: priority, tag: firstTag + UInt64(offset))
            )
        }
        return notifications
    }
}

extension HTTP2Notification: CampaignNotification {
    static func make(_ tokens: [DeviceToken], values: [[UInt8]]?, firstTag: UInt64, template campaign: CampaignTemplate) -> [Self] {
        guard case .http2(let template) = campaign.wire else {
            preconditionFailure("an HTTP/2 channel was given a template of another protocol")
        }
        var notifications: [HTTP2Notification] = []
        notifications.reserveCapacity(tokens.count)
        for (offset, token) in tokens.enumerated() {
            let tag = firstTag + UInt64(offset)
            if let personalization = campaign.personalization, let values {
                let payload = campaign.render(personalization, values[offset])
                notifications.append(HTTP2Notification(token: token, tag: tag, template: template, ownPayload: payload))
            } else {
                notifications.append(HTTP2Notification(token: token, tag: tag, template: template))
            }
        }
        return notifications
    }
}

/// ``DeliveryChannel`` over either protocol's sender.
struct SenderChannel<Sender: NotificationSender>: DeliveryChannel where Sender.Notification: CampaignNotification {
    let sender: Sender

    var outcomes: AsyncStream<[DeliveryOutcome]> { self.sender.events }

    var tokensWanted: Int? { self.sender.notificationsWanted }

    func send(_ tokens: [DeviceToken], values: [[UInt8]]?, firstTag: UInt64, template: CampaignTemplate) async throws {
        try await self.sender.send(Sender.Notification.make(tokens, values: values, firstTag: firstTag, template: template))
    }

    func withdraw(runTag: UInt64) async -> [UInt64] {
        await self.sender.withdraw { $0.tag & SlotContext.runTagMask == runTag }.map(\.tag)
    }

    func setWriteDeadline(_ deadline: ContinuousClock.Instant?) { self.sender.setWriteDeadline(deadline) }

    func totals() async -> SenderTotals { await self.sender.totals() }

    func shutdown() async { _ = await self.sender.shutdown() }
}
