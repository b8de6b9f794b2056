package import Foundation
package import PushFleetCore

// The JSON bodies of `pushfleet api`, decoded and checked before anything is written. This folder
// needs nothing but PushFleetCore and Foundation, so that the fuzz package can compile it alone.

/// Input the API answers with 400: `message` names the field and what is wrong with it.
package struct APIInputError: Error, Equatable, CustomStringConvertible {
    package let message: String
    package init(_ message: String) { self.message = message }
    package var description: String { self.message }
}

/// The fields `POST /v1/notify` and `POST /v1/campaigns` share, checked as `launch` checks its
/// options: the topic, environment, payload (against APNs' limit for its push type) and headers.
package struct NotificationFields: Equatable {
    package var id: UUID?
    package var topic: String
    package var environment: APNsEnvironment
    package var payload: Payload
    package var pushType: String
    package var priority: Int
    package var expiration: Int
    package var collapseID: String?

    /// - Parameter payload: the payload to check instead of the body's `payload` (a split test's
    ///   first variant's).
    package init(_ body: JSONValue, payload given: JSONValue? = nil) throws(APIInputError) {
        guard case .object = body else { throw APIInputError("the body must be a JSON object") }
        self.id = try APIBody.optionalString(body, "id").map { text throws(APIInputError) in try APIBody.uuid(text) }
        self.topic = try APIBody.string(body, "topic")
        guard !self.topic.isEmpty else { throw APIInputError("\"topic\" must not be empty") }
        self.environment = try APIBody.environment(try APIBody.optionalString(body, "environment"), "\"environment\"")
        self.pushType = try APIBody.optionalString(body, "push_type") ?? "alert"
        guard APNsPushType.all.contains(self.pushType) else {
            throw APIInputError("\"push_type\" \(self.pushType) is not one of \(APNsPushType.all.sorted().joined(separator: ", "))")
        }
        if let mismatch = APNsPushType.mismatch(topic: self.topic, pushType: self.pushType) {
            throw APIInputError("\"topic\" and \"push_type\" do not match: \(mismatch)")
        }
        self.priority = try APIBody.optionalInteger(body, "priority") ?? 10
        guard [10, 5, 1].contains(self.priority) else { throw APIInputError("\"priority\" is 10, 5 or 1") }
        self.expiration = try APIBody.optionalInteger(body, "expiration") ?? 0
        self.collapseID = try APIBody.optionalString(body, "collapse_id")
        if let collapse = self.collapseID, collapse.utf8.count > 64 {
            throw APIInputError("\"collapse_id\" is \(collapse.utf8.count) bytes; APNs allows 64")
        }
        guard let payload = given ?? body["payload"] else { throw APIInputError("\"payload\" is missing") }
        self.payload = try Self.payload(payload, pushType: self.pushType, name: "\"payload\"")
    }

    /// What the notification or campaign sends, and how.
    package var definition: CampaignDefinition {
        CampaignDefinition(
            topic: self.topic, environment: self.environment, payload: self.payload.bytes, pushType: self.pushType,
            priority: self.priority, expiration: self.expiration, collapseID: self.collapseID
        )
    }

    /// `json` as a payload of `pushType`, checked against APNs' limit; `name` says which in an error.
    package static func payload(_ json: JSONValue, pushType: String, name: String) throws(APIInputError) -> Payload {
        do {
            return try Payload(json, format: .http2(pushType: pushType))
        } catch {
            throw APIInputError("\(name): \(error)")
        }
    }
}

/// A variant of a split test in `POST /v1/campaigns`: `{"name": "A", "payload": {…}, "weight": 50}`.
package struct VariantBody: Equatable {
    package var name: String
    package var payload: Payload
    package var weight: Int
}

/// `POST /v1/notify`: the notification's fields and exactly one audience.
package struct NotifyBody: Equatable {
    package enum Audience: Equatable {
        case user(String)
        case group(String)
        case tokens([DeviceToken])
    }

    package var fields: NotificationFields
    package var audience: Audience

    package init(_ body: JSONValue) throws(APIInputError) {
        self.fields = try NotificationFields(body)
        switch (body["user"], body["group"], body["tokens"]) {
        case (.string(let user)?, nil, nil): self.audience = .user(user)
        case (nil, .string(let group)?, nil): self.audience = .group(group)
        case (nil, nil, .array(let list)?): self.audience = .tokens(try APIBody.tokens(list))
        default: throw APIInputError("give exactly one of \"user\" (a string), \"group\" (a string) or \"tokens\" (an array of hex strings)")
        }
    }
}

/// `POST /v1/campaigns`: the notification's fields, the shard size, and the audience: the tokens
/// given, or every active device of the topic in the registry.
package struct CampaignBody: Equatable {
    package enum Audience: Equatable {
        case tokens([DeviceToken])
        /// `recipients`: tokens with their locale, time zone and fields, for `localized`,
        /// `local_time` and payload templates.
        case recipients([RecipientBody])
        case registry
    }

    package static let shardSizes = 1...100_000

    package var fields: NotificationFields
    package var shardSize: Int
    package var audience: Audience
    /// `rate`: notifications per second, fleet-wide; nil sends as fast as the fleet can.
    package var rateLimit: Int?
    /// `at`: when it starts (ISO 8601); nil starts at once.
    package var startsAt: Date?
    /// `variants`: a split test's variants, each with its payload (then no `payload`); empty otherwise.
    package var variants: [VariantBody]
    /// `localized`: a payload per locale (`{"fr": {…}, "pt-BR": {…}}`), `payload` for the others.
    package var localized: [(locale: String, payload: Payload)]
    /// `local_time`: `HH:MM`, each recipient's start in its own time zone (checked by the server).
    package var localTime: String?
    /// `default_zone`: the time zone of recipients without one.
    package var defaultZone: TimeZone?

    package static func == (a: Self, b: Self) -> Bool {
        a.fields == b.fields && a.shardSize == b.shardSize && a.audience == b.audience && a.rateLimit == b.rateLimit
            && a.startsAt == b.startsAt && a.variants == b.variants && a.localTime == b.localTime && a.defaultZone == b.defaultZone
            && a.localized.map(\.locale) == b.localized.map(\.locale) && a.localized.map(\.payload) == b.localized.map(\.payload)
    }

    package init(_ body: JSONValue) throws(APIInputError) {
        var variantPayloads: [(name: String, payload: JSONValue, weight: Int)] = []
        switch body["variants"] {
        case nil, .null?: break
        case .array(let list)?:
            guard body["payload"] == nil else { throw APIInputError("give \"payload\", or \"variants\" each with its payload, not both") }
            guard (2...26).contains(list.count) else { throw APIInputError("\"variants\" has 2 to 26 variants, not \(list.count)") }
            for (index, item) in list.enumerated() {
                guard case .object = item, let payload = item["payload"] else {
                    throw APIInputError("\"variants\"[\(index)] must be an object with \"name\", \"payload\" and \"weight\"")
                }
                let name = try APIBody.string(item, "name")
                guard let weight = try APIBody.optionalInteger(item, "weight"), (1...1_000_000).contains(weight) else {
                    throw APIInputError("\"variants\"[\(index)] needs a \"weight\" of 1 to 1000000")
                }
                variantPayloads.append((name, payload, weight))
            }
        default: throw APIInputError("\"variants\" must be an array")
        }
        self.fields = try NotificationFields(body, payload: variantPayloads.first?.payload)
        let pushType = self.fields.pushType
        self.variants = []
        for (index, v) in variantPayloads.enumerated() {
            let payload = try NotificationFields.payload(v.payload, pushType: pushType, name: "\"variants\"[\(index)].payload")
            self.variants.append(VariantBody(name: v.name, payload: payload, weight: v.weight))
        }
        self.shardSize = try APIBody.optionalInteger(body, "shard_size") ?? 1_000
        guard Self.shardSizes.contains(self.shardSize) else { throw APIInputError("\"shard_size\" is between 1 and 100000") }
        self.rateLimit = try APIBody.optionalInteger(body, "rate")
        if let rate = self.rateLimit, !(1...100_000_000).contains(rate) { throw APIInputError("\"rate\" is 1 to 100000000 notifications a second") }
        self.startsAt = try APIBody.optionalTime(body, "at")
        self.localized = []
        switch body["localized"] {
        case nil, .null?: break
        case .object(let members)?:
            guard self.variants.isEmpty else { throw APIInputError("\"localized\" and \"variants\" do not go together: a variant has one payload") }
            guard !members.isEmpty else { throw APIInputError("\"localized\" names no locale") }
            for (locale, payload) in members {
                guard !locale.isEmpty, locale.lowercased() != "default",
                    locale.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
                else {
                    throw APIInputError("\"localized\" has \"\(locale.prefix(40))\", which is not a locale such as fr or pt-BR")
                }
                self.localized.append((locale, try NotificationFields.payload(payload, pushType: pushType, name: "\"localized\".\(locale)")))
            }
        default: throw APIInputError("\"localized\" must be an object of locales and their payloads, such as {\"fr\": {\"aps\": …}}")
        }
        self.localTime = try APIBody.optionalString(body, "local_time")
        if self.localTime != nil, self.startsAt != nil { throw APIInputError("\"at\" and \"local_time\" do not go together") }
        self.defaultZone = try APIBody.optionalString(body, "default_zone").map { name throws(APIInputError) in
            guard let zone = TimeZone(identifier: name) else { throw APIInputError("\"default_zone\" is an IANA time zone such as Europe/Paris, not \(name)") }
            return zone
        }
        switch (body["tokens"], body["recipients"], body["from_registry"]) {
        case (.array(let list)?, nil, nil), (.array(let list)?, nil, .bool(false)?): self.audience = .tokens(try APIBody.tokens(list))
        case (nil, .array(let list)?, nil), (nil, .array(let list)?, .bool(false)?): self.audience = .recipients(try RecipientBody.list(list))
        case (nil, nil, .bool(true)?): self.audience = .registry
        default:
            throw APIInputError(
                "give \"tokens\" (an array of hex strings), \"recipients\" (an array of {\"token\", \"locale\", \"time_zone\", fields…}) or \"from_registry\": true"
            )
        }
    }
}

/// A recipient of `POST /v1/campaigns` with the fields a launch reads:
/// `{"token": "…", "locale": "fr_FR", "time_zone": "Europe/Paris", "first_name": "Zoë"}`, the
/// others for the placeholders of a payload template.
package struct RecipientBody: Equatable, Sendable {
    package var token: DeviceToken
    package var locale: String?
    package var zone: String?
    /// The whole object, whose members fill a template's placeholders.
    package var object: JSONValue = .null

    /// The value of the member `name` for a template's placeholder (nil: none).
    /// - Throws: ``AudienceLineError`` for a member that is not a string or a number.
    package func field(_ name: String) throws(AudienceLineError) -> String? { try AudienceLine.field(name, of: self.object) }

    static func list(_ list: [JSONValue]) throws(APIInputError) -> [RecipientBody] {
        var recipients: [RecipientBody] = []
        recipients.reserveCapacity(list.count)
        for (offset, item) in list.enumerated() {
            guard case .object = item, case .string(let hex)? = item["token"] else {
                throw APIInputError("\"recipients\"[\(offset)] must be an object with a \"token\" string")
            }
            do {
                recipients.append(RecipientBody(
                    token: try DeviceToken(hex: hex), locale: try APIBody.optionalString(item, "locale"), zone: try APIBody.optionalString(item, "time_zone"),
                    object: item
                ))
            } catch {
                throw APIInputError("\"recipients\"[\(offset)]: \(error)")
            }
        }
        return recipients
    }
}

/// `PUT /v1/devices/{token}`: whose device it is, for which app, since when.
package struct DeviceBody: Equatable {
    package var topic: String
    package var environment: APNsEnvironment
    package var user: String
    package var platform: String?
    /// When the phone registered; nil: when the request arrives.
    package var registeredAt: Date?
    /// `locale` and `time_zone`: what localized and local-time campaigns of the registry read;
    /// nil keeps what the device registered before (checked by the registry).
    package var locale: String?
    package var timeZone: String?

    package init(_ body: JSONValue) throws(APIInputError) {
        guard case .object = body else { throw APIInputError("the body must be a JSON object") }
        self.topic = try APIBody.string(body, "topic")
        if let at = body["registered_at"] {
            guard case .string(let text) = at, let date = try? Date(text, strategy: .iso8601) else {
                throw APIInputError("\"registered_at\" must be an ISO 8601 time such as 2026-11-25T08:00:00Z")
            }
            self.registeredAt = date
        } else {
            self.registeredAt = nil
        }
        self.environment = try APIBody.environment(try APIBody.optionalString(body, "environment"), "\"environment\"")
        self.user = try APIBody.string(body, "user")
        self.platform = try APIBody.optionalString(body, "platform")
        self.locale = try APIBody.optionalString(body, "locale")
        self.timeZone = try APIBody.optionalString(body, "time_zone")
    }
}

/// `PUT /v1/groups/{id}/members`: the group's users, replacing the ones it had.
package struct GroupMembersBody: Equatable {
    package var users: [String]

    package init(_ body: JSONValue) throws(APIInputError) {
        guard case .array(let list)? = body["users"] else { throw APIInputError("\"users\" must be an array of user ids") }
        self.users = try list.map { value throws(APIInputError) -> String in
            guard case .string(let user) = value else { throw APIInputError("\"users\" must be an array of user ids (strings)") }
            return user
        }
    }
}

/// Reading single fields of a body.
package enum APIBody {
    package static func uuid(_ text: String?) throws(APIInputError) -> UUID {
        guard let text, let id = UUID(uuidString: text) else { throw APIInputError("\(text ?? "the id") is not a UUID") }
        return id
    }

    package static func token(_ hex: String) throws(APIInputError) -> DeviceToken {
        do {
            return try DeviceToken(hex: hex)
        } catch {
            throw APIInputError("device token \(hex.prefix(80)): \(error)")
        }
    }

    package static func tokens(_ list: [JSONValue]) throws(APIInputError) -> [DeviceToken] {
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(list.count)
        for (offset, value) in list.enumerated() {
            guard case .string(let hex) = value else { throw APIInputError("\"tokens\"[\(offset)] is not a string") }
            do {
                tokens.append(try DeviceToken(hex: hex))
            } catch {
                throw APIInputError("\"tokens\"[\(offset)]: \(error)")
            }
        }
        return tokens
    }

    /// The environment `text` names, production when it is nil; `name` is where it came from (a
    /// body's field or a query parameter), for the error.
    package static func environment(_ text: String?, _ name: String) throws(APIInputError) -> APNsEnvironment {
        guard let text else { return .production }
        do {
            return try APNsEnvironment(parsing: text, name: name)
        } catch {
            throw APIInputError(error.description)
        }
    }

    package static func string(_ body: JSONValue, _ name: String) throws(APIInputError) -> String {
        guard let value = try Self.optionalString(body, name) else { throw APIInputError("\"\(name)\" is missing") }
        return value
    }

    package static func optionalString(_ body: JSONValue, _ name: String) throws(APIInputError) -> String? {
        switch body[name] {
        case nil, .null?: return nil
        case .string(let value)?: return value
        default: throw APIInputError("\"\(name)\" must be a string")
        }
    }

    package static func optionalTime(_ body: JSONValue, _ name: String) throws(APIInputError) -> Date? {
        switch body[name] {
        case nil, .null?: return nil
        case .string(let text)?:
            guard let date = (try? Date(text, strategy: .iso8601))
                ?? (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
            else {
                throw APIInputError("\"\(name)\" must be an ISO 8601 time such as 2026-12-01T09:00:00Z, not \(text)")
            }
            return date
        default: throw APIInputError("\"\(name)\" must be an ISO 8601 time such as 2026-12-01T09:00:00Z")
        }
    }

    package static func optionalInteger(_ body: JSONValue, _ name: String) throws(APIInputError) -> Int? {
        switch body[name] {
        case nil, .null?: return nil
        case .number(let text)?:
            guard let value = Int(text) else { throw APIInputError("\"\(name)\" must be an integer, not \(text)") }
            return value
        default: throw APIInputError("\"\(name)\" must be a number")
        }
    }
}
