import APNSMockServer
import NIOHTTP2
import PushFleetCore
import PushFleetTestSupport
import Testing

/// The simulator's HTTP/2 provider API over real TLS on loopback: one test per validation rule.
@Suite struct HTTP2GatewayTests {
    typealias Fixture = HTTP2GatewayFixture

    @Test func acceptsAValidRequestAndEchoesItsAPNSID() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let apnsID = "123e4567-e89b-12d3-a456-426614174000"
        let authorization = try fixture.authorization()
        let echoed = try await client.send(headers: Fixture.headers(authorization: authorization, apnsID: apnsID), body: Fixture.body)
        #expect(echoed.status == 200)
        #expect(echoed.header("apns-id") == apnsID)
        #expect(echoed.body.isEmpty)
        // The same claims signed again are the same token, not an update.
        let resigned = try fixture.authorization()
        #expect(resigned != authorization)
        let generated = try await client.send(headers: Fixture.headers(token: TestTokens.token(2), authorization: resigned), body: Fixture.body)
        #expect(generated.status == 200)
        let id = try #require(generated.header("apns-id"))
        #expect(id.count == 36 && id == id.lowercased() && id != apnsID)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(1)) == 1)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(2)) == 1)
        #expect(fixture.ledger.snapshot().connections["http2"] == 1)
    }

    @Test(arguments: [
        // (what, header changes, body, status, reason)
        ("GET", [(":method", "GET")], Fixture.body, 405, "MethodNotAllowed"),
        ("path not /3/device/", [(":path", "/3/devices/abcd")], Fixture.body, 404, "BadPath"),
        ("no token in the path", [(":path", "/3/device/")], Fixture.body, 400, "MissingDeviceToken"),
        ("token not hex", [(":path", "/3/device/zz00")], Fixture.body, 400, "BadDeviceToken"),
        ("odd number of hex digits", [(":path", "/3/device/abc")], Fixture.body, 400, "BadDeviceToken"),
        ("no apns-topic", [("apns-topic", nil)], Fixture.body, 400, "MissingTopic"),
        ("topic with a space", [("apns-topic", "com.example app")], Fixture.body, 400, "BadTopic"),
        ("topic not allowed", [("apns-topic", "com.example.other")], Fixture.body, 400, "TopicDisallowed"),
        ("another app's voip topic", [("apns-push-type", "voip"), ("apns-topic", "com.example.other.voip")], Fixture.body, 400, "TopicDisallowed"),
        ("unknown push type", [("apns-push-type", "fax")], Fixture.body, 400, "InvalidPushType"),
        ("voip topic, alert push type", [("apns-topic", "com.example.app.voip")], Fixture.body, 400, "InvalidPushType"),
        ("voip topic, no push type", [("apns-topic", "com.example.app.voip"), ("apns-push-type", nil)], Fixture.body, 400, "InvalidPushType"),
        ("voip push type, bundle ID topic", [("apns-push-type", "voip")], Fixture.body, 400, "DeviceTokenNotForTopic"),
        ("live activity push type, bundle ID topic", [("apns-push-type", "liveactivity")], Fixture.body, 400, "DeviceTokenNotForTopic"),
        ("topic that is only a suffix", [("apns-push-type", "voip"), ("apns-topic", ".voip")], Fixture.body, 400, "BadTopic"),
        ("priority 7", [("apns-priority", "7")], Fixture.body, 400, "BadPriority"),
        ("expiration not an integer", [("apns-expiration", "tomorrow")], Fixture.body, 400, "BadExpirationDate"),
        ("collapse id of 65 bytes", [("apns-collapse-id", String(repeating: "c", count: 65))], Fixture.body, 400, "BadCollapseId"),
        ("apns-id not a UUID", [("apns-id", "123e4567-e89b-12d3-a456-42661417400")], Fixture.body, 400, "BadMessageId"),
        ("no body", [], nil, 400, "PayloadEmpty"),
        ("4097-byte body", [], String(repeating: " ", count: 4097), 413, "PayloadTooLarge"),
        ("5121-byte voip body", [("apns-push-type", "voip"), ("apns-topic", "com.example.app.voip")], String(repeating: " ", count: 5121), 413, "PayloadTooLarge"),
        ("no authorization", [("authorization", nil)], Fixture.body, 403, "MissingProviderToken"),
        ("empty authorization", [("authorization", "")], Fixture.body, 403, "MissingProviderToken"),
        ("malformed provider token", [("authorization", "bearer not.a.jwt")], Fixture.body, 403, "InvalidProviderToken"),
    ] as [(String, [(String, String?)], String?, Int, String)])
    func rejectsWithAPNsStatusAndReason(_ what: String, changes: [(String, String?)], body: String?, status: Int, reason: String) async throws {
        let fixture = try await Fixture.start(allowedTopics: [Fixture.topic])
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        var headers = Fixture.headers(authorization: try fixture.authorization())
        for (name, value) in changes { headers = headers.setting(name, to: value) }
        let response = try await client.send(headers: headers, body: body)
        #expect(response.status == status, "\(what)")
        #expect(response.reason == reason, "\(what)")
        #expect(response.header("content-type") == "application/json", "\(what)")
        #expect(response.timestamp == nil, "\(what)")
        #expect(fixture.ledger.snapshot().accepted == 0, "\(what)")
        #expect(fixture.ledger.snapshot().rejected == [reason: 1], "\(what)")
    }

    @Test func voipAllowsFiveKilobytes() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let headers = Fixture.headers(authorization: try fixture.authorization()).setting("apns-push-type", to: "voip").setting("apns-topic", to: "com.example.app.voip")
        #expect(try await client.send(headers: headers, body: String(repeating: " ", count: 5120)).status == 200)
        #expect(try await client.send(headers: headers.setting("apns-push-type", to: "alert").setting("apns-topic", to: Fixture.topic), body: String(repeating: " ", count: 4097)).status == 413)
    }

    @Test func repeatedHeaderIsDuplicateHeaders() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let headers = Fixture.headers(authorization: try fixture.authorization()) + [("apns-topic", Fixture.topic)]
        let response = try await client.send(headers: headers, body: Fixture.body)
        #expect(response.status == 400)
        #expect(response.reason == "DuplicateHeaders")
    }

    @Test func configuredInvalidTokenIsBadDeviceToken() async throws {
        let fixture = try await Fixture.start(invalidTokens: [TestTokens.token(7)])
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let response = try await client.send(headers: Fixture.headers(token: TestTokens.token(7), authorization: try fixture.authorization()), body: Fixture.body)
        #expect(response.status == 400)
        #expect(response.reason == "BadDeviceToken")
        #expect(fixture.ledger.deliveries(of: TestTokens.token(7)) == 0)
    }

    @Test func everyPushTypeIsAcceptedOnItsOwnTopic() async throws {
        let fixture = try await Fixture.start(allowedTopics: [Fixture.topic])
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let authorization = try fixture.authorization()
        let topics = [
            "alert": "", "background": "", "mdm": "", "voip": ".voip", "complication": ".complication",
            "fileprovider": ".pushkit.fileprovider", "location": ".location-query", "liveactivity": ".push-type.liveactivity",
            "pushtotalk": ".voip-ptt", "widgets": ".push-type.widgets",
        ]
        for (pushType, suffix) in topics.sorted(by: { $0.key < $1.key }) {
            let headers = Fixture.headers(authorization: authorization).setting("apns-push-type", to: pushType).setting("apns-topic", to: Fixture.topic + suffix)
            let response = try await client.send(headers: headers, body: Fixture.body)
            #expect(response.status == 200, "\(pushType) on \(Fixture.topic + suffix): \(response.status.map(String.init) ?? "reset") \(response.reason ?? "")")
        }
        #expect(fixture.ledger.snapshot().accepted == topics.count)
    }

    @Test func anExactAllowedTopicAllowsThatTopicOnly() async throws {
        let fixture = try await Fixture.start(allowedTopics: [Fixture.topic + ".voip"])
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let headers = Fixture.headers(authorization: try fixture.authorization())
        let voip = try await client.send(headers: headers.setting("apns-push-type", to: "voip").setting("apns-topic", to: Fixture.topic + ".voip"), body: Fixture.body)
        #expect(voip.status == 200)
        let alert = try await client.send(headers: headers, body: Fixture.body)
        #expect(alert.status == 400)
        #expect(alert.reason == "TopicDisallowed")
    }

    @Test func tokenOfAnotherTopicIsDeviceTokenNotForTopic() async throws {
        let fixture = try await Fixture.start(otherTopicTokens: [TestTokens.token(9)])
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let response = try await client.send(headers: Fixture.headers(token: TestTokens.token(9), authorization: try fixture.authorization()), body: Fixture.body)
        #expect(response.status == 400)
        #expect(response.reason == "DeviceTokenNotForTopic")
        #expect(fixture.ledger.deliveries(of: TestTokens.token(9)) == 0)
        #expect(try await client.send(headers: Fixture.headers(authorization: try fixture.authorization()), body: Fixture.body).status == 200)
    }

    @Test func unregisteredTokenIs410WithTheTimestampInMilliseconds() async throws {
        let fixture = try await Fixture.start(unregisteredTokens: [TestTokens.token(8)])
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let response = try await client.send(headers: Fixture.headers(token: TestTokens.token(8), authorization: try fixture.authorization()), body: Fixture.body)
        #expect(response.status == 410)
        #expect(response.reason == "Unregistered")
        #expect(response.timestamp == fixture.clock.now)
        #expect(fixture.ledger.snapshot().rejected == ["Unregistered": 1])
        #expect(fixture.ledger.deliveries(of: TestTokens.token(8)) == 0)
    }

    @Test func ledgerCountsExactlyTheAcceptedNotifications() async throws {
        let fixture = try await Fixture.start(invalidTokens: [TestTokens.token(7)], unregisteredTokens: [TestTokens.token(8)])
        defer { Task { await fixture.stop() } }
        let client = try await fixture.certificateClient()
        defer { Task { await client.close() } }
        var statuses: [Int?] = []
        for index in [1, 2, 3, 1, 7, 8, 2] {
            statuses.append(try await client.send(headers: Fixture.headers(token: TestTokens.token(index), authorization: nil), body: Fixture.body).status)
        }
        _ = try await client.send(headers: Fixture.headers(token: TestTokens.token(4), authorization: nil).setting("apns-priority", to: "2"), body: Fixture.body)
        #expect(statuses == [200, 200, 200, 200, 400, 410, 200])
        let snapshot = fixture.ledger.snapshot()
        #expect(snapshot.accepted == 5)
        #expect(snapshot.distinctTokens == 3)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(1)) == 2)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(4)) == 0)
        #expect(snapshot.rejected == ["BadDeviceToken": 1, "Unregistered": 1, "BadPriority": 1])
    }
}
