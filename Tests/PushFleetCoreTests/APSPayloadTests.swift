import PushFleetCore
import Testing

private func json(_ payload: APSPayload, format: PayloadFormat = .http2) throws -> String {
    String(decoding: try payload.payload(for: format).bytes, as: UTF8.self)
}

@Suite struct APSPayloadTests {
    @Test func emptyBuilderIsAnEmptyApsDictionary() throws {
        #expect(try json(APSPayload()) == #"{"aps":{}}"#)
    }

    @Test func fullBuilderWithAlertStringWritesEveryKeyInOrder() throws {
        let payload = APSPayload(
            alert: .text("Ding dong"),
            badge: 3,
            sound: "default",
            contentAvailable: true,
            mutableContent: true,
            category: "DOORBELL",
            threadID: "door-1",
            custom: [
                ("door", .string("front")),
                ("aps", .string("must be ignored")),
                ("event", .object([("id", .integer(42)), ("at", .number("1.50"))])),
            ]
        )
        let expected =
            #"{"aps":{"alert":"Ding dong","badge":3,"sound":"default","content-available":1,"mutable-content":1,"#
            + #""category":"DOORBELL","thread-id":"door-1"},"door":"front","event":{"id":42,"at":1.50}}"#
        #expect(try json(payload) == expected)
        #expect(try payload.payload(for: .http2).bytes == Array(expected.utf8))
    }

    @Test func fullAlertDictionaryUsesApplesKeyNames() throws {
        var alert = APSPayload.AlertDictionary(title: "Front door", subtitle: "Camera 1", body: "Someone rang")
        alert.launchImage = "door.png"
        alert.titleLocKey = "DOOR_TITLE"
        alert.titleLocArgs = ["Front"]
        alert.locKey = "DOOR_BODY"
        alert.locArgs = ["Alice", "Bob"]
        let payload = APSPayload(alert: .dictionary(alert), sound: "chime.caf")
        let expected =
            #"{"aps":{"alert":{"title":"Front door","subtitle":"Camera 1","body":"Someone rang","launch-image":"door.png","#
            + #""title-loc-key":"DOOR_TITLE","title-loc-args":["Front"],"loc-key":"DOOR_BODY","loc-args":["Alice","Bob"]},"#
            + #""sound":"chime.caf"}}"#
        #expect(try json(payload) == expected)
    }

    @Test func alertDictionaryLeavesOutUnsetMembers() throws {
        let bodyOnly = APSPayload(alert: .dictionary(.init(body: "Ding")))
        #expect(try json(bodyOnly) == #"{"aps":{"alert":{"body":"Ding"}}}"#)

        var argsOnly = APSPayload.AlertDictionary()
        argsOnly.locArgs = []
        #expect(try json(APSPayload(alert: .dictionary(argsOnly))) == #"{"aps":{"alert":{"loc-args":[]}}}"#)

        #expect(try json(APSPayload(alert: .dictionary(.init()))) == #"{"aps":{"alert":{}}}"#)
    }

    @Test func falseFlagsAreLeftOutButZeroBadgeIsKept() throws {
        // badge 0 clears the badge on the device, so it must be sent.
        let payload = APSPayload(badge: 0, contentAvailable: false, mutableContent: false)
        #expect(try json(payload) == #"{"aps":{"badge":0}}"#)

        let silent = APSPayload(contentAvailable: true)
        #expect(try json(silent) == #"{"aps":{"content-available":1}}"#)
    }

    @Test func customKeysComeAfterApsInTheirOrder() throws {
        let payload = APSPayload(
            alert: .text("x"),
            custom: [("z", .integer(1)), ("aps", .object([("badge", .integer(9))])), ("a", .null), ("m", .bool(false))]
        )
        #expect(try json(payload) == #"{"aps":{"alert":"x"},"z":1,"a":null,"m":false}"#)
        guard case .object(let members) = payload.jsonValue else {
            Issue.record("expected an object")
            return
        }
        #expect(members.map(\.key) == ["aps", "z", "a", "m"])
    }

    @Test func textIsEscapedAndNonASCIIStaysRaw() throws {
        let payload = APSPayload(alert: .text("门铃 \"front\"\n😀"), sound: "a/b.caf")
        let bytes = try payload.payload(for: .binaryLegacy).bytes
        #expect(String(decoding: bytes, as: UTF8.self) == #"{"aps":{"alert":"门铃 \"front\"\n😀","sound":"a/b.caf"}}"#)
        // 60 bytes: the CJK characters are 3 bytes each and the emoji 4, not 6- and 12-byte \u escapes.
        #expect(bytes.count == 60)
    }

    @Test func theDocumentationExampleProducesWhatItSays() throws {
        var payload = APSPayload(alert: .text("Ding dong"))
        payload.badge = 1
        payload.sound = "default"
        payload.custom = [("door", .string("front"))]
        #expect(
            try json(payload, format: .binaryFrame)
                == #"{"aps":{"alert":"Ding dong","badge":1,"sound":"default"},"door":"front"}"#
        )
    }

    @Test func payloadForAFormatEnforcesItsLimit() throws {
        let payload = APSPayload(alert: .text(String(repeating: "a", count: 300)))
        let error = #expect(throws: PayloadError.self) { try payload.payload(for: .binaryLegacy) }
        #expect(error?.code == .tooLarge)
        // {"aps":{"alert":"…"}} is 20 bytes around the text.
        #expect(error?.message.hasPrefix("the payload is 320 bytes as compact UTF-8 JSON, 64 bytes over the 256-byte limit") == true)
        #expect(try payload.payload(for: .binaryFrame).byteCount == 320)
        #expect(try payload.payload(for: .binaryFrame).format == .binaryFrame)
    }

    @Test func equalityFollowsTheJSONItProduces() {
        let a = APSPayload(alert: .text("x"), badge: 1, custom: [("k", .integer(1))])
        let b = APSPayload(alert: .text("x"), badge: 1, custom: [("k", .integer(1)), ("aps", .null)])
        let c = APSPayload(alert: .text("x"), badge: 1, custom: [("k", .integer(2))])
        let d = APSPayload(alert: .text("x"), badge: 1, custom: [("j", .null), ("k", .integer(1))])
        let e = APSPayload(alert: .text("x"), badge: 1, custom: [("k", .integer(1)), ("j", .null)])
        #expect(a == b, "a custom aps key is ignored, so it does not make payloads differ")
        #expect(a.hashValue == b.hashValue)
        #expect(a != c)
        #expect(d != e, "custom key order is part of the payload")
        #expect(Set([a, b, c, d, e]).count == 4)
    }
}
