// libFuzzer target: the request bodies of `pushfleet api` (POST /v1/notify, POST /v1/campaigns,
// PUT /v1/devices/{token}, PUT /v1/groups/{id}/members), decoded from any bytes as the server
// decodes them: JSONParser, then each body type of Sources/PushFleetAPI/Requests.
//
// Properties checked on arbitrary bytes that are JSON (what is not JSON is refused before):
// 1. Nothing traps; a body is either decoded or refused with an APIInputError whose message is
//    not empty (the API's 400).
// 2. What is decoded keeps the API's rules: a topic that is not empty, production or sandbox, one
//    of Apple's push types that fits the topic, priority 10, 5 or 1, a collapse id of at most 64
//    bytes, a payload that is a JSON object within its push type's limit and is the body's
//    "payload" written compactly; one audience; tokens in the order given; a shard size within
//    1...100000.
// 3. A decoded body written back as JSON (by the writer below) decodes to the same value.
// 4. A member the API does not know, appended to the object, changes nothing.
import APIRequests
import Foundation
import FuzzSupport
import PushFleetCore

private func describe(_ bytes: [UInt8]) -> String {
    String(decoding: bytes.prefix(300), as: UTF8.self).debugDescription + (bytes.count > 300 ? "… (\(bytes.count) bytes)" : "")
}

private func reparsed(_ payload: Payload) -> JSONValue { try! JSONParser.parse(payload.bytes) }

private func written(_ fields: NotificationFields) -> [(key: String, value: JSONValue)] {
    var members: [(key: String, value: JSONValue)] = [
        ("topic", .string(fields.topic)), ("environment", .string(fields.environment.rawValue)), ("payload", reparsed(fields.payload)),
        ("push_type", .string(fields.pushType)), ("priority", .integer(fields.priority)), ("expiration", .integer(fields.expiration)),
    ]
    if let id = fields.id { members.append(("id", .string(id.uuidString))) }
    if let collapse = fields.collapseID { members.append(("collapse_id", .string(collapse))) }
    return members
}

private func tokenList(_ tokens: [DeviceToken]) -> JSONValue { .array(tokens.map { .string($0.hexString) }) }

private func again<Body: Equatable>(_ members: [(key: String, value: JSONValue)], _ decode: (JSONValue) throws(APIInputError) -> Body) -> Body? {
    let text = JSONValue.object(members).compactUTF8
    guard let json = try? JSONParser.parse(text) else {
        check(false, "the writer's JSON does not parse: \(describe(text))")
        return nil
    }
    return try? decode(json)
}

/// - Parameter payload: where the fields' payload came from: the body's `payload`, or a split
///   test's first variant's.
private func checkFields(_ fields: NotificationFields, _ body: JSONValue, _ input: [UInt8], payload: JSONValue? = nil) {
    check(!fields.topic.isEmpty, "empty topic from \(describe(input))")
    check(APNsPushType.all.contains(fields.pushType) && APNsPushType.mismatch(topic: fields.topic, pushType: fields.pushType) == nil,
          "push type \(fields.pushType) for topic \(fields.topic)")
    check([10, 5, 1].contains(fields.priority), "priority \(fields.priority)")
    check((fields.collapseID?.utf8.count ?? 0) <= 64, "collapse id of \(fields.collapseID?.utf8.count ?? 0) bytes")
    check(fields.payload.byteCount <= PayloadFormat.http2(pushType: fields.pushType).maximumByteCount, "payload of \(fields.payload.byteCount) bytes")
    guard let given = payload ?? body["payload"], case .object = given else { check(false, "payload is not an object: \(describe(input))"); return }
    check(fields.payload.bytes == given.compactUTF8, "payload is not the body's payload written compactly: \(describe(input))")
}

/// Decodes `json` as `Body`; checks the refusal, or runs `accepted` on the value.
private func decoding<Body: Equatable>(_ json: JSONValue, _ input: [UInt8], _ decode: (JSONValue) throws(APIInputError) -> Body, _ accepted: (Body) -> Void) {
    let result: Result<Body, APIInputError>
    do throws(APIInputError) { result = .success(try decode(json)) } catch { result = .failure(error) }
    switch result {
    case .success(let body): accepted(body)
    case .failure(let error): check(!error.message.isEmpty, "an empty message for \(describe(input))")
    }
    if case .object(var members) = json {
        members.append((key: "x-pushfleet-fuzz-unknown", value: .array([.null])))
        let withExtra: Result<Body, APIInputError>
        do throws(APIInputError) { withExtra = .success(try decode(.object(members))) } catch { withExtra = .failure(error) }
        check(withExtra == result, "an unknown member changed the outcome for \(describe(input))")
    }
}

/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzAPIRequest_main`); release
/// builds use libFuzzer's own `main` and never call this.
@_cdecl("FuzzAPIRequest_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let input = Array(UnsafeRawBufferPointer(start: start, count: count))
    guard let json = try? JSONParser.parse(input) else { return 0 }

    decoding(json, input, NotifyBody.init) { body in
        checkFields(body.fields, json, input)
        var members = written(body.fields)
        switch body.audience {
        case .user(let user):
            check(json["user"] == .string(user), "user \(user)")
            members.append(("user", .string(user)))
        case .group(let group):
            check(json["group"] == .string(group), "group \(group)")
            members.append(("group", .string(group)))
        case .tokens(let tokens):
            check(json["tokens"].map { guard case .array(let list) = $0 else { return false }; return list.count == tokens.count } ?? false, "token count")
            members.append(("tokens", tokenList(tokens)))
        }
        check(again(members, NotifyBody.init) == body, "notify: written back, it decodes otherwise: \(describe(input))")
    }

    decoding(json, input, CampaignBody.init) { body in
        var firstVariant: JSONValue? = nil
        if !body.variants.isEmpty, case .array(let list)? = json["variants"], let first = list.first { firstVariant = first["payload"] }
        checkFields(body.fields, json, input, payload: firstVariant)
        check(CampaignBody.shardSizes.contains(body.shardSize), "shard size \(body.shardSize)")
        var members = written(body.fields) + [("shard_size", .integer(body.shardSize))]
        if !body.variants.isEmpty {
            // A split test: the fields' payload is the first variant's, and not written on its own.
            check((2...26).contains(body.variants.count), "\(body.variants.count) variants")
            check(body.fields.payload == body.variants[0].payload, "the fields' payload is not the first variant's")
            check(body.variants.allSatisfy { $0.weight >= 1 }, "a variant's weight below 1")
            members.removeAll { $0.key == "payload" }
            members.append(("variants", .array(body.variants.map { v in
                .object([("name", .string(v.name)), ("payload", reparsed(v.payload)), ("weight", .integer(v.weight))])
            })))
        }
        if let rate = body.rateLimit {
            check(rate >= 1, "rate \(rate)")
            members.append(("rate", .integer(rate)))
        }
        if let at = body.startsAt { members.append(("at", .string(at.formatted(.iso8601)))) }
        if !body.localized.isEmpty {
            check(body.variants.isEmpty, "localized payloads beside variants")
            members.append(("localized", .object(body.localized.map { ($0.locale, reparsed($0.payload)) })))
        }
        if let time = body.localTime { members.append(("local_time", .string(time))) }
        if let zone = body.defaultZone { members.append(("default_zone", .string(zone.identifier))) }
        switch body.audience {
        case .tokens(let tokens): members.append(("tokens", tokenList(tokens)))
        case .recipients(let recipients):
            // Each recipient's object as it came: its other members are a template's fields.
            members.append(("recipients", .array(recipients.map(\.object))))
        case .registry: members.append(("from_registry", .bool(true)))
        }
        // Times compare as written (as for the device's registered_at).
        let decoded = again(members, CampaignBody.init)
        var (got, expected) = (decoded, body)
        got?.startsAt = nil
        expected.startsAt = nil
        check(got == expected && decoded?.startsAt?.formatted(.iso8601) == body.startsAt?.formatted(.iso8601),
              "campaign: written back, it decodes otherwise: \(describe(input))")
    }

    decoding(json, input, DeviceBody.init) { body in
        var members: [(key: String, value: JSONValue)] = [
            ("topic", .string(body.topic)), ("environment", .string(body.environment.rawValue)), ("user", .string(body.user)),
        ]
        if let platform = body.platform { members.append(("platform", .string(platform))) }
        if let locale = body.locale { members.append(("locale", .string(locale))) }
        if let zone = body.timeZone { members.append(("time_zone", .string(zone))) }
        if let at = body.registeredAt {
            check(at.timeIntervalSince1970.isFinite, "registered_at \(at)")
            members.append(("registered_at", .string(at.formatted(.iso8601))))
        }
        let decoded = again(members, DeviceBody.init)
        check(decoded?.topic == body.topic && decoded?.user == body.user && decoded?.environment == body.environment
              && decoded?.platform == body.platform && decoded?.locale == body.locale && decoded?.timeZone == body.timeZone
              && decoded?.registeredAt?.formatted(.iso8601) == body.registeredAt?.formatted(.iso8601),
              "device: written back, it decodes otherwise: \(describe(input))")
    }

    decoding(json, input, GroupMembersBody.init) { body in
        check(again([("users", .array(body.users.map { .string($0) }))], GroupMembersBody.init) == body, "members: written back, it decodes otherwise")
    }
    return 0
}
