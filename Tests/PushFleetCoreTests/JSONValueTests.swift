import PushFleetCore
import Testing

private func compact(_ value: JSONValue) -> String {
    String(decoding: value.compactUTF8, as: UTF8.self)
}

@Suite struct JSONValueTests {
    // MARK: - Serializing

    @Test func serializesCompactlyWithoutWhiteSpace() throws {
        let value = JSONValue.object([
            ("aps", .object([("alert", .string("Ding dong")), ("badge", .integer(1))])),
            ("list", .array([.null, .bool(true), .bool(false), .number("1.50"), .array([]), .object([])])),
            ("empty", .string("")),
        ])
        #expect(
            compact(value)
                == #"{"aps":{"alert":"Ding dong","badge":1},"list":[null,true,false,1.50,[],{}],"empty":""}"#
        )
    }

    @Test func parsingAPrettyDocumentAndSerializingDropsOnlyInsignificantWhiteSpace() throws {
        let pretty = """
            {
                "aps" : {
                    "alert" : "a b  c",
                    "badge" : 7
                },
                "x" : [ 1 , 2 ]
            }
            """
        #expect(compact(try JSONParser.parse(pretty)) == #"{"aps":{"alert":"a b  c","badge":7},"x":[1,2]}"#)
    }

    @Test func doesNotEscapeSlashes() {
        #expect(compact(.string("https://example.com/a/b")) == #""https://example.com/a/b""#)
        #expect(compact(.object([("a/b", .string("/"))])) == #"{"a/b":"/"}"#)
    }

    @Test func writesNonASCIIAsRawUTF8() {
        let bytes = JSONValue.string("门铃").compactUTF8
        // Two quotes and six bytes: three per character, no \u escapes.
        #expect(bytes.count == 8)
        #expect(bytes == [0x22, 0xE9, 0x97, 0xA8, 0xE9, 0x93, 0x83, 0x22])

        #expect(JSONValue.string("é").compactUTF8 == [0x22, 0xC3, 0xA9, 0x22])
        #expect(JSONValue.string("😀").compactUTF8 == [0x22, 0xF0, 0x9F, 0x98, 0x80, 0x22])
        #expect(!compact(.object([("门", .string("铃 😀 café"))])).contains("\\u"))
        #expect(compact(.object([("门", .string("铃 😀 café"))])) == #"{"门":"铃 😀 café"}"#)
    }

    @Test(arguments: [
        ("\"", #""\"""#),
        ("\\", #""\\""#),
        ("\n", #""\n""#),
        ("\r", #""\r""#),
        ("\t", #""\t""#),
        ("\u{0}", #""\u0000""#),
        ("\u{1}", #""\u0001""#),
        ("\u{8}", #""\u0008""#),
        ("\u{C}", #""\u000c""#),
        ("\u{1B}", #""\u001b""#),
        ("\u{1F}", #""\u001f""#),
        // Not control characters in JSON: written as themselves.
        (" ", #"" ""#),
        ("\u{7F}", "\"\u{7F}\""),
        ("'", #""'""#),
        ("a\"b\\c\nd", #""a\"b\\c\nd""#),
    ])
    func escapesQuotesBackslashesAndControlCharacters(text: String, expected: String) {
        #expect(compact(.string(text)) == expected)
        // Keys go through the same escaping.
        #expect(compact(.object([(text, .null)])) == "{\(expected):null}")
    }

    @Test func writesNumbersAsTheirText() {
        #expect(compact(.number("1.10")) == "1.10")
        #expect(compact(.number("-0")) == "-0")
        #expect(compact(.number("1e5")) == "1e5")
        #expect(compact(.number("10000000000000000001")) == "10000000000000000001")
        #expect(compact(.integer(0)) == "0")
        #expect(compact(.integer(-42)) == "-42")
        #expect(compact(.integer(Int.max)) == "9223372036854775807")
        #expect(compact(.integer(Int.min)) == "-9223372036854775808")
    }

    @Test func writeAppendsToExistingBytes() {
        var out = Array("prefix:".utf8)
        JSONValue.array([.integer(1), .string("x")]).write(into: &out)
        #expect(out == Array(#"prefix:[1,"x"]"#.utf8))
    }

    // MARK: - Round trips

    @Test(arguments: [
        #"{}"#,
        #"[]"#,
        #"{"aps":{"alert":{"title":"门铃","body":"Someone is at the door 🚪"},"badge":1,"sound":"default"}}"#,
        #"{"z":1,"a":[1.10,-0,1e5,10000000000000000001,true,false,null],"m":{"":""}}"#,
        #"["\"\\\/\b\f\n\r\t","\u00e9\ud83d\ude00","\u0001\u001F","<\/script>"]"#,
        #"  { "spaced" : [ 1 , { "deep" : [ [ [ ] ] ] } ] }  "#,
    ])
    func roundTripsParseSerializeParse(text: String) throws {
        let first = try JSONParser.parse(text)
        let serialized = first.compactUTF8
        let second = try JSONParser.parse(serialized)
        #expect(second == first)
        // Serializing is a fixed point after one pass.
        #expect(second.compactUTF8 == serialized)
    }

    @Test func roundTripsEveryControlCharacter() throws {
        let text = String(decoding: (0..<0x20).map { UInt8($0) } + Array("after".utf8), as: UTF8.self)
        let serialized = JSONValue.string(text).compactUTF8
        // Nothing below 0x20 survives unescaped.
        #expect(serialized.dropFirst().dropLast().allSatisfy { $0 >= 0x20 })
        #expect(try JSONParser.parse(serialized) == .string(text))
    }

    // MARK: - Equality, hashing, lookup

    @Test func equalityRespectsMemberOrderAndNumberText() {
        let ab = JSONValue.object([("a", .integer(1)), ("b", .integer(2))])
        let ba = JSONValue.object([("b", .integer(2)), ("a", .integer(1))])
        #expect(ab == .object([("a", .number("1")), ("b", .number("2"))]))
        #expect(ab != ba)
        #expect(ab != .object([("a", .integer(1))]))
        #expect(JSONValue.number("1.0") != .number("1"))
        #expect(JSONValue.integer(1) == .number("1"))
        #expect(JSONValue.string("1") != .number("1"))
        #expect(JSONValue.null != .bool(false))
        #expect(JSONValue.array([]) != .object([]))
        #expect(JSONValue.array([.null]) != .array([.null, .null]))
    }

    @Test func equalValuesHashEqual() throws {
        let parsed = try JSONParser.parse(#"{"a":[1,{"b":null}],"c":"门"}"#)
        let built = JSONValue.object([
            ("a", .array([.integer(1), .object([("b", .null)])])),
            ("c", .string("门")),
        ])
        #expect(parsed == built)
        #expect(parsed.hashValue == built.hashValue)
        #expect(Set([parsed, built, .object([])]).count == 2)
    }

    @Test func subscriptFindsTheFirstMemberOfAnObjectOnly() {
        let value = JSONValue.object([("a", .integer(1)), ("b", .integer(2)), ("a", .integer(3))])
        #expect(value["a"] == .integer(1))
        #expect(value["b"] == .integer(2))
        #expect(value["missing"] == nil)
        #expect(JSONValue.array([.integer(1)])["a"] == nil)
        #expect(JSONValue.string("a")["a"] == nil)
    }
}
