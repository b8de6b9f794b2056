// libFuzzer target: the simulator's HTTP/2 request path: HTTP2ServerFramer reading what any
// client sends (after a valid preface and SETTINGS), then HTTP2RequestValidator judging every
// complete request, and the framer writing the answer.
//
// Properties checked on arbitrary bytes:
// 1. Nothing traps, answers included. Fed whole, or in chunks of 1 and 7 bytes (7 and 97 past
//    300 bytes), the framer reports the same events and ends with the same connection error, if
//    any (compared on runs that write no answers: when an answer goes out changes what later
//    frames on its stream mean).
// 2. For a connection with a verified client certificate, the validator's verdict is the one the
//    reference below gives: APNs' rules in APNs' order, written here from the table in
//    HTTP2RequestValidator's documentation with no code of its own, for configured invalid,
//    unregistered and other-topic tokens and allowed topics.
// 3. Without a certificate (and no provider keys configured), every request that passes the
//    request-line checks is refused with 403 and a provider-token reason, and nothing else changes.
// 4. A verdict given the device token the validator read ahead and looked up (prepareTokens, as
//    the simulator's gateway does for a read's requests) is the verdict given without it.
import APNSWire
import FuzzSupport
import NIOCore
import PushFleetCore
import SimulatorRequestValidation

private let invalid = try! DeviceToken(hex: "aa")
private let unregistered = try! DeviceToken(hex: "bbbb")
private let otherTopic = try! DeviceToken(hex: "cccccc")
private let allowedTopics: Set<String> = ["com.example.app", "com.example.other.voip"]
private let pushTypes: Set<String> = [
    "alert", "background", "location", "voip", "complication", "fileprovider", "mdm", "liveactivity", "pushtotalk", "widgets",
]
private let suffixes: [(pushType: String, suffix: String)] = [
    ("voip", ".voip"), ("complication", ".complication"), ("fileprovider", ".pushkit.fileprovider"),
    ("location", ".location-query"), ("liveactivity", ".push-type.liveactivity"), ("pushtotalk", ".voip-ptt"),
    ("widgets", ".push-type.widgets"),
]

private struct Reference {
    var method: String?, path: String?, topic: String?, pushType: String?, priority: String?
    var expiration: String?, collapseID: String?, apnsID: String?
    var duplicates = false

    init(_ fields: [HTTP2HeaderField]) {
        var seen: Set<String> = []
        for field in fields {
            switch field.name {
            case ":method": method = field.value
            case ":path": path = field.value
            default:
                guard field.name == "authorization" || field.name.hasPrefix("apns-") else { continue }
                if !seen.insert(field.name).inserted { duplicates = true }
                switch field.name {
                case "apns-topic": topic = field.value
                case "apns-push-type": pushType = field.value
                case "apns-priority": priority = field.value
                case "apns-expiration": expiration = field.value
                case "apns-collapse-id": collapseID = field.value
                case "apns-id": apnsID = field.value
                default: break
                }
            }
        }
    }

    static func isHex(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) || (0x61...0x66).contains(b) || (0x41...0x46).contains(b) }

    static func isUUID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        return bytes.indices.allSatisfy { [8, 13, 18, 23].contains($0) ? bytes[$0] == UInt8(ascii: "-") : isHex(bytes[$0]) }
    }

    /// Rules 1 to 4 (a fresh connection is never wedged): nil if the request line is fine.
    func requestLineVerdict() -> (Int, String)? {
        if method != "POST" { return (405, "MethodNotAllowed") }
        guard let path, path.hasPrefix("/3/device/") else { return (404, "BadPath") }
        if duplicates { return (400, "DuplicateHeaders") }
        return nil
    }

    /// Rules 6 to 23, after authentication.
    func verdict(bodyBytes: Int) -> (Int, String) {
        if let early = requestLineVerdict() { return early }
        let hex = Array(path!.utf8.dropFirst("/3/device/".count))
        if hex.isEmpty { return (400, "MissingDeviceToken") }
        guard hex.allSatisfy(Self.isHex), hex.count % 2 == 0, hex.count <= 510,
            let token = try? DeviceToken(hex: String(decoding: hex, as: UTF8.self))
        else { return (400, "BadDeviceToken") }
        guard let topic, !topic.isEmpty else { return (400, "MissingTopic") }
        let topicCharacters = topic.utf8.allSatisfy { b in
            (0x30...0x39).contains(b) || (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) || b == 0x2E || b == 0x2D || b == 0x5F
        }
        if !topicCharacters { return (400, "BadTopic") }
        if let pushType, !pushTypes.contains(pushType) { return (400, "InvalidPushType") }
        let suffixed = suffixes.first { topic.hasSuffix($0.suffix) }
        if let suffixed, pushType != suffixed.pushType { return (400, "InvalidPushType") }
        if suffixed == nil, let pushType, suffixes.contains(where: { $0.pushType == pushType }) { return (400, "DeviceTokenNotForTopic") }
        let app = String(topic.utf8.dropLast(suffixed?.suffix.utf8.count ?? 0))!
        if app.isEmpty { return (400, "BadTopic") }
        if !allowedTopics.contains(topic), !allowedTopics.contains(app) { return (400, "TopicDisallowed") }
        if let priority, !["10", "5", "1"].contains(priority) { return (400, "BadPriority") }
        if let expiration, Int64(expiration) == nil { return (400, "BadExpirationDate") }
        if let collapseID, collapseID.utf8.count > 64 { return (400, "BadCollapseId") }
        if let apnsID, !Self.isUUID(apnsID) { return (400, "BadMessageId") }
        if bodyBytes == 0 { return (400, "PayloadEmpty") }
        if bodyBytes > (pushType == "voip" ? 5120 : 4096) { return (413, "PayloadTooLarge") }
        if token == invalid { return (400, "BadDeviceToken") }
        if token == unregistered { return (410, "Unregistered") }
        if token == otherTopic { return (400, "DeviceTokenNotForTopic") }
        return (200, "")
    }
}

private func validator() -> HTTP2RequestValidator {
    HTTP2RequestValidator(
        refusedTokens: RefusedTokens(invalid: [invalid], unregistered: [unregistered], otherTopic: [otherTopic]), allowedTopics: allowedTopics, keys: [:]
    )
}

private let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) + [0, 0, 0, 4, 0, 0, 0, 0, 0]

/// Reads `bytes` after the preface in chunks of `chunk` (0: whole); returns the events as text and
/// the connection error, if any. With `judge`, validates and answers every complete request.
private func run(_ bytes: [UInt8], chunk: Int, judge: Bool) -> ([String], String?) {
    var framer = HTTP2ServerFramer(settings: [
        HTTP2SettingValue(HTTP2Wire.Setting.maxConcurrentStreams, 1000),
        HTTP2SettingValue(HTTP2Wire.Setting.initialWindowSize, 65_535),
        HTTP2SettingValue(HTTP2Wire.Setting.maxFrameSize, 16_384),
    ])
    framer.start()
    var verified = validator()
    var unverified = validator()
    var events: [String] = []
    var requests: [Int32: (fields: [HTTP2HeaderField], body: Int)] = [:]
    var complete: [(Int32, [HTTP2HeaderField], Int)] = []
    let input = preface + bytes
    // What the framer left unread (an incomplete frame) is kept and the next read appended, as
    // the gateway's handler does.
    var buffer = ByteBuffer()
    var start = 0
    while start < input.count {
        let end = chunk == 0 ? input.count : min(input.count, start + chunk)
        buffer.writeBytes(input[start..<end])
        start = end
        do {
            try framer.read(&buffer) { event in
                if case .data(let streamID, let payload, let flowControlledLength, let endStream) = event {
                    // The payload's bytes, not the buffer's indices, which differ with the chunking.
                    events.append("data(\(streamID), \(Array(payload.readableBytesView)), \(flowControlledLength), \(endStream))")
                } else {
                    events.append(String(describing: event))
                }
                switch event {
                case .headers(let streamID, let fields, let endStream):
                    if requests[streamID] == nil { requests[streamID] = (fields, 0) }
                    if endStream, let request = requests.removeValue(forKey: streamID) { complete.append((streamID, request.fields, request.body)) }
                case .data(let streamID, let payload, _, let endStream):
                    requests[streamID]?.body += payload.readableBytes
                    if endStream, let request = requests.removeValue(forKey: streamID) { complete.append((streamID, request.fields, request.body)) }
                case .reset(let streamID):
                    requests[streamID] = nil
                case .ping, .pingAnswered, .goAway:
                    break
                }
            }
        } catch {
            while framer.take() != nil {}
            return (events, String(describing: error))
        }
        guard judge else {
            while framer.take() != nil {}
            buffer.discardReadBytes()
            continue
        }
        // The chunk's requests read ahead together, as the gateway reads a burst's, with an event
        // that is not HEADERS between them: one slot per event.
        var prepared: [HTTP2RequestValidator.PreparedToken?] = []
        verified.prepareTokens(complete.flatMap { request in [.ping, .headers(streamID: request.0, fields: request.1, endStream: true)] }, into: &prepared)
        check(prepared.count == 2 * complete.count, "\(prepared.count) tokens read ahead for \(2 * complete.count) events")
        for (index, (streamID, fields, body)) in complete.enumerated() {
            let reference = Reference(fields)
            let expected = reference.verdict(bodyBytes: body)
            var authenticated = false
            var twin = verified
            let verdict = verified.validate(.init(fields: fields), bodyBytes: body, certificateVerified: true, now: 1_700_000_000, authenticated: &authenticated)
            var twinAuthenticated = false
            check(prepared[2 * index] == nil, "a token read ahead for an event that is not HEADERS")
            let ahead = twin.validate(
                .init(fields: fields), prepared: prepared[2 * index + 1], bodyBytes: body, certificateVerified: true, now: 1_700_000_000,
                authenticated: &twinAuthenticated
            )
            check(ahead == verdict && twinAuthenticated == authenticated, "with the token read ahead \(ahead), without \(verdict) for \(fields)")
            switch verdict {
            case .accepted:
                check(expected.0 == 200, "accepted; the reference says \(expected) for \(fields) with \(body) body bytes")
                check(authenticated, "accepted without authentication")
            case .rejected(let status, let reason, let timestamp):
                check(expected == (status, reason.rawValue), "\(status) \(reason.rawValue); the reference says \(expected) for \(fields) with \(body) body bytes")
                check((timestamp != nil) == (status == 410), "timestamp \(String(describing: timestamp)) with status \(status)")
            }
            var unverifiedAuthenticated = false
            let withoutCertificate = unverified.validate(.init(fields: fields), bodyBytes: body, certificateVerified: false, now: 1_700_000_000, authenticated: &unverifiedAuthenticated)
            check(!unverifiedAuthenticated, "authenticated with no certificate and no keys")
            if let early = reference.requestLineVerdict() {
                check(withoutCertificate == .rejected(status: early.0, reason: RejectionReason(rawValue: early.1), timestamp: nil), "without a certificate: \(withoutCertificate), expected \(early)")
            } else if case .rejected(let status, let reason, _) = withoutCertificate {
                check(status == 403 && ["MissingProviderToken", "InvalidProviderToken"].contains(reason.rawValue), "without a certificate: \(status) \(reason.rawValue)")
            } else {
                check(false, "accepted without a certificate or a provider token")
            }
            switch verdict {
            case .accepted: framer.writeAnswer(streamID: streamID, status: 200, apnsID: "00000000-0000-0000-0000-000000000001", body: nil)
            case .rejected(let status, let reason, _):
                framer.writeAnswer(streamID: streamID, status: status, apnsID: "00000000-0000-0000-0000-000000000001", body: ByteBuffer(string: #"{"reason":"\#(reason.rawValue)"}"#))
            }
        }
        complete.removeAll()
        while framer.take() != nil {}
        buffer.discardReadBytes()
    }
    return (events, nil)
}

/// The entry point of SwiftPM's Linux debug builds (`--defsym main=FuzzHTTP2Request_main`);
/// release builds use libFuzzer's own `main` and never call this.
@_cdecl("FuzzHTTP2Request_main")
public func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    runFuzzDriver(argc, argv) { data, size in fuzzTestOneInput(UnsafeRawPointer(data), size) }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    _ = run(bytes, chunk: 0, judge: true)
    let (events, error) = run(bytes, chunk: 0, judge: false)
    // Byte by byte only for short inputs: a read per byte makes long ones slow to fuzz.
    for chunk in bytes.count <= 300 ? [1, 7] : [7, 97] {
        let (chunkedEvents, chunkedError) = run(bytes, chunk: chunk, judge: false)
        check(chunkedEvents == events, "chunks of \(chunk): \(chunkedEvents.count) events, whole \(events.count): \(chunkedEvents.suffix(2)) vs \(events.suffix(2))")
        check(chunkedError == error, "chunks of \(chunk): error \(String(describing: chunkedError)), whole \(String(describing: error))")
    }
    return 0
}
