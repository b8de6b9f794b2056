import PushFleetCore
import Testing

/// An object whose compact form is exactly `byteCount` bytes: `{"p":"xxx…"}` is 8 bytes plus the filler.
private func object(byteCount: Int, filler: Character = "x") -> JSONValue {
    .object([("p", .string(String(repeating: filler, count: byteCount - 8)))])
}

@Suite struct PayloadTests {
    @Test(arguments: [
        (PayloadFormat.binaryLegacy, 256),
        (.binaryFrame, 2048),
        (.http2, 4096),
        (.voip, 5120),
    ])
    func limitsAreApplesDocumentedSizes(format: PayloadFormat, limit: Int) {
        #expect(format.maximumByteCount == limit)
    }

    @Test(arguments: [PayloadFormat.binaryLegacy, .binaryFrame, .http2, .voip])
    func acceptsExactlyTheLimit(format: PayloadFormat) throws {
        let limit = format.maximumByteCount
        let value = object(byteCount: limit)
        #expect(value.compactUTF8.count == limit)

        let payload = try Payload(value, format: format)
        #expect(payload.byteCount == limit)
        #expect(payload.bytes == value.compactUTF8)
        #expect(payload.format == format)

        let fromText = try Payload(jsonText: value.compactUTF8, format: format)
        #expect(fromText == payload)
    }

    @Test(arguments: [PayloadFormat.binaryLegacy, .binaryFrame, .http2, .voip])
    func refusesOneByteOverTheLimit(format: PayloadFormat) {
        let limit = format.maximumByteCount
        let value = object(byteCount: limit + 1)
        let error = #expect(throws: PayloadError.self) { try Payload(value, format: format) }
        #expect(error?.code == .tooLarge)
        #expect(
            error?.message
                == "the payload is \(limit + 1) bytes as compact UTF-8 JSON, 1 bytes over the \(limit)-byte limit of the \(format)"
        )

        let fromText = #expect(throws: PayloadError.self) { try Payload(jsonText: value.compactUTF8, format: format) }
        #expect(fromText?.code == .tooLarge)
    }

    @Test func tooLargeMessageSaysHowManyBytesOver() {
        let error = #expect(throws: PayloadError.self) { try Payload(object(byteCount: 3_000), format: .binaryFrame) }
        #expect(error?.code == .tooLarge)
        #expect(
            error?.description
                == "the payload is 3000 bytes as compact UTF-8 JSON, 952 bytes over the 2048-byte limit of the binary protocol command 2"
        )

        let legacy = #expect(throws: PayloadError.self) { try Payload(object(byteCount: 300), format: .binaryLegacy) }
        #expect(
            legacy?.message
                == "the payload is 300 bytes as compact UTF-8 JSON, 44 bytes over the 256-byte limit of the binary protocol commands 0 and 1"
        )

        let voip = #expect(throws: PayloadError.self) { try Payload(object(byteCount: 6_000), format: .voip) }
        #expect(
            voip?.message
                == "the payload is 6000 bytes as compact UTF-8 JSON, 880 bytes over the 5120-byte limit of the HTTP/2 provider API for VoIP pushes"
        )

        let http2 = #expect(throws: PayloadError.self) { try Payload(object(byteCount: 4_100), format: .http2) }
        #expect(http2?.message.hasSuffix("4 bytes over the 4096-byte limit of the HTTP/2 provider API") == true)
    }

    @Test func countsUTF8BytesNotCharacters() throws {
        // "门" is three bytes: 8 + 82 × 3 = 254 bytes fits 256, 83 × 3 makes 257.
        let fits = JSONValue.object([("p", .string(String(repeating: "门", count: 82)))])
        #expect(try Payload(fits, format: .binaryLegacy).byteCount == 254)

        let over = JSONValue.object([("p", .string(String(repeating: "门", count: 83)))])
        let error = #expect(throws: PayloadError.self) { try Payload(over, format: .binaryLegacy) }
        #expect(error?.message.hasPrefix("the payload is 257 bytes as compact UTF-8 JSON, 1 bytes over") == true)
    }

    @Test func jsonTextIsMeasuredInItsCompactForm() throws {
        // 251 bytes of content padded with white space to well over 256 bytes of text.
        let alert = String(repeating: "a", count: 231)
        let compactText = #"{"aps":{"alert":"\#(alert)"}}"#
        #expect(compactText.utf8.count == 251)
        let spacious = "\n  {\n\t\"aps\" :  {  \"alert\"  :  \"\(alert)\"\r\n  }  }" + String(repeating: " ", count: 40)
        #expect(spacious.utf8.count > 256)

        let payload = try Payload(jsonText: Array(spacious.utf8), format: .binaryLegacy)
        #expect(payload.bytes == Array(compactText.utf8))
        #expect(payload.byteCount == 251)
    }

    @Test func jsonTextWithEscapesBecomesRawUTF8() throws {
        let payload = try Payload(jsonText: Array(#"{"aps":{"alert":"\u95e8\u94c3"}}"#.utf8), format: .binaryLegacy)
        #expect(payload.bytes == Array(#"{"aps":{"alert":"门铃"}}"#.utf8))
        #expect(payload.byteCount == 26)
    }

    @Test(arguments: [#"[{"aps":{}}]"#, #""aps""#, "null", "1", "true"])
    func refusesJSONThatIsNotAnObject(text: String) throws {
        let error = #expect(throws: PayloadError.self) { try Payload(jsonText: Array(text.utf8), format: .http2) }
        #expect(error?.code == .notAnObject)
        #expect(error?.message == #"the payload must be a JSON object (usually with an "aps" dictionary)"#)

        let value = try JSONParser.parse(text)
        let direct = #expect(throws: PayloadError.self) { try Payload(value, format: .http2) }
        #expect(direct?.code == .notAnObject)
    }

    @Test func invalidJSONCarriesTheParsersPosition() {
        let text = #"{"aps":{"alert":"hi",}}"#
        let error = #expect(throws: PayloadError.self) { try Payload(jsonText: Array(text.utf8), format: .http2) }
        #expect(error?.code == .invalidJSON)
        #expect(
            error?.message
                == "the payload is not valid JSON: invalid JSON at line 1, column 22 (byte 21): expected a string key in an object, found '}'"
        )

        let multiLine = "{\n  \"aps\": {\n    \"badge\": 01\n  }\n}"
        let second = #expect(throws: PayloadError.self) { try Payload(jsonText: Array(multiLine.utf8), format: .http2) }
        #expect(second?.code == .invalidJSON)
        #expect(second?.message.contains("line 3, column 15 (byte 27): numbers must not have leading zeros") == true)
    }

    @Test func errorsCompareByCode() {
        let a = #expect(throws: PayloadError.self) { try Payload(jsonText: Array("[".utf8), format: .http2) }
        let b = #expect(throws: PayloadError.self) { try Payload(jsonText: Array("{".utf8), format: .voip) }
        let c = #expect(throws: PayloadError.self) { try Payload(jsonText: Array("[]".utf8), format: .http2) }
        #expect(a == b)
        #expect(a != c)
        #expect(a?.code.description == "invalidJSON")
        #expect(c?.code.description == "notAnObject")
    }

    @Test func formatsAreDistinctAndDescribed() {
        let formats: [PayloadFormat] = [.binaryLegacy, .binaryFrame, .http2, .voip]
        #expect(Set(formats).count == 4)
        #expect(formats.map(\.description) == [
            "binary protocol commands 0 and 1",
            "binary protocol command 2",
            "HTTP/2 provider API",
            "HTTP/2 provider API for VoIP pushes",
        ])
    }

    @Test func samePayloadCheckedForDifferentFormatsIsNotEqual() throws {
        let value = JSONValue.object([("aps", .object([]))])
        let frame = try Payload(value, format: .binaryFrame)
        let http2 = try Payload(value, format: .http2)
        #expect(frame.bytes == http2.bytes)
        #expect(frame != http2)
        let frameAgain = try Payload(value, format: .binaryFrame)
        #expect(frame == frameAgain)
        #expect(frame.hashValue == frameAgain.hashValue)
    }
}
