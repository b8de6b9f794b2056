import PushFleetCore
import Testing

/// One document the parser must refuse, with the position it must report.
private struct BadJSON: Sendable, CustomTestStringConvertible {
    var bytes: [UInt8]
    var reason: String
    var byteOffset: Int
    var line: Int
    var column: Int

    init(_ text: String, _ reason: String, byteOffset: Int, line: Int = 1, column: Int) {
        self.init(bytes: Array(text.utf8), reason, byteOffset: byteOffset, line: line, column: column)
    }

    init(bytes: [UInt8], _ reason: String, byteOffset: Int, line: Int = 1, column: Int) {
        self.bytes = bytes
        self.reason = reason
        self.byteOffset = byteOffset
        self.line = line
        self.column = column
    }

    var testDescription: String { String(decoding: self.bytes, as: UTF8.self).debugDescription }
}

private func nested(_ depth: Int, open: String, close: String, inner: String = "") -> String {
    String(repeating: open, count: depth) + inner + String(repeating: close, count: depth)
}

@Suite struct JSONParserTests {
    // MARK: - Valid documents

    @Test(arguments: [
        ("null", JSONValue.null),
        ("true", .bool(true)),
        ("false", .bool(false)),
        ("0", .number("0")),
        (#""""#, .string("")),
        (#""doorbell""#, .string("doorbell")),
        ("[]", .array([])),
        ("{}", .object([])),
        ("[null,true,false]", .array([.null, .bool(true), .bool(false)])),
        (" \t\r\n 42 \n\t", .number("42")),
    ])
    func parsesEveryKindOfValue(text: String, expected: JSONValue) throws {
        #expect(try JSONParser.parse(text) == expected)
        #expect(try JSONParser.parse(Array(text.utf8)) == expected)
    }

    @Test func parsesANestedDocument() throws {
        let text = """
            {
              "aps": {"alert": {"title": "Door", "body": "Ding"}, "badge": 1, "sound": null},
              "ids": [1, [2, {"x": []}], -3.5],
              "ok": true
            }
            """
        let expected = JSONValue.object([
            (
                "aps",
                .object([
                    ("alert", .object([("title", .string("Door")), ("body", .string("Ding"))])),
                    ("badge", .number("1")),
                    ("sound", .null),
                ])
            ),
            ("ids", .array([.number("1"), .array([.number("2"), .object([("x", .array([]))])]), .number("-3.5")])),
            ("ok", .bool(true)),
        ])
        #expect(try JSONParser.parse(text) == expected)
    }

    @Test func keepsObjectKeysInTheOrderWritten() throws {
        let value = try JSONParser.parse(#"{"z":1,"a":2,"m":3,"b":{"y":0,"c":0}}"#)
        guard case .object(let members) = value else {
            Issue.record("expected an object, got \(value)")
            return
        }
        #expect(members.map(\.key) == ["z", "a", "m", "b"])
        guard case .object(let inner) = members[3].value else {
            Issue.record("expected an object, got \(members[3].value)")
            return
        }
        #expect(inner.map(\.key) == ["y", "c"])
        #expect(String(decoding: value.compactUTF8, as: UTF8.self) == #"{"z":1,"a":2,"m":3,"b":{"y":0,"c":0}}"#)
    }

    @Test func keepsDuplicateKeysAndLooksUpTheFirst() throws {
        let value = try JSONParser.parse(#"{"a":1,"a":2}"#)
        #expect(value == .object([("a", .number("1")), ("a", .number("2"))]))
        #expect(value["a"] == .number("1"))
    }

    @Test(arguments: [
        "0", "-0", "1.10", "1.0", "-12.500", "1e5", "1E5", "1e+5", "1E-05", "-0.0e0", "123456789",
        // Larger than any 64-bit integer, and more precise than any Double.
        "10000000000000000001", "-92233720368547758080", "3.14159265358979323846264338327950288",
    ])
    func keepsNumbersAsTheirText(text: String) throws {
        #expect(try JSONParser.parse(text) == .number(text))
        #expect(try JSONParser.parse("[\(text)]") == .array([.number(text)]))
        #expect(try JSONParser.parse("[\(text)]").compactUTF8 == Array("[\(text)]".utf8))
    }

    @Test(arguments: [
        (#""\"""#, "\""),
        (#""\\""#, "\\"),
        (#""\/""#, "/"),
        (#""\b\f\n\r\t""#, "\u{8}\u{C}\n\r\t"),
        (#""a\u0041b""#, "aAb"),
        (#""\u00e9""#, "é"),
        (#""\u00E9""#, "é"),
        (#""\u95e8\u94c3""#, "门铃"),
        (#""\u0000""#, "\u{0}"),
        (#""\u001f""#, "\u{1F}"),
        // A pair of UTF-16 surrogates is one scalar.
        (#""\ud83d\ude00""#, "😀"),
        (#""\uD83D\uDE00!""#, "😀!"),
        (#""\udbff\udfff""#, "\u{10FFFF}"),
        // Raw UTF-8 passes through, DEL needs no escape.
        ("\"门铃 😀 \u{7F}\"", "门铃 😀 \u{7F}"),
    ])
    func decodesEscapes(text: String, expected: String) throws {
        #expect(try JSONParser.parse(text) == .string(expected))
    }

    @Test func escapedKeysAreDecodedToo() throws {
        let value = try JSONParser.parse(#"{"caf\u00e9":1}"#)
        #expect(value["café"] == .number("1"))
    }

    @Test func acceptsNestingUpToTheMaximumDepth() throws {
        #expect(JSONParser.maximumDepth == 64)
        let arrays = try JSONParser.parse(nested(64, open: "[", close: "]"))
        var depth = 0
        var current = arrays
        while case .array(let elements) = current {
            depth += 1
            guard let first = elements.first else { break }
            current = first
        }
        #expect(depth == 64)

        _ = try JSONParser.parse(nested(64, open: #"{"a":"#, close: "}", inner: "1"))
        _ = try JSONParser.parse(nested(63, open: "[", close: "]", inner: #"{"a":1}"#))
    }

    @Test func depthIsCountedPerPathNotPerDocument() throws {
        // Many siblings each 64 deep: the depth must come back down after every one.
        let deep = nested(63, open: "[", close: "]")
        let text = "[" + Array(repeating: deep, count: 100).joined(separator: ",") + "]"
        guard case .array(let elements) = try JSONParser.parse(text) else {
            Issue.record("expected an array")
            return
        }
        #expect(elements.count == 100)
        let objects = "[" + Array(repeating: nested(62, open: #"{"k":"#, close: "}", inner: "{}"), count: 3).joined(separator: ",") + "]"
        _ = try JSONParser.parse(objects)
    }

    // MARK: - Invalid documents

    @Test(arguments: [
        // Trailing commas.
        BadJSON("[1,2,]", "unexpected character ']', expected a value", byteOffset: 5, column: 6),
        BadJSON(#"{"a":1,}"#, "expected a string key in an object, found '}'", byteOffset: 7, column: 8),
        // Structure.
        BadJSON("", "unexpected end of input, expected a value", byteOffset: 0, column: 1),
        BadJSON("  \n ", "unexpected end of input, expected a value", byteOffset: 4, line: 2, column: 2),
        BadJSON("[1 2]", "expected ',' or ']' in an array, found '2'", byteOffset: 3, column: 4),
        BadJSON("[1,", "unexpected end of input, expected a value", byteOffset: 3, column: 4),
        BadJSON(#"{"a" 1}"#, #"expected ':' after the key "a", found '1'"#, byteOffset: 5, column: 6),
        BadJSON(#"{"a":1 "b":2}"#, "expected ',' or '}' in an object, found '\"'", byteOffset: 7, column: 8),
        BadJSON("{a:1}", "expected a string key in an object, found 'a'", byteOffset: 1, column: 2),
        BadJSON("'a'", "unexpected character ''', expected a value", byteOffset: 0, column: 1),
        BadJSON("tru", "unexpected character 't', expected a value", byteOffset: 0, column: 1),
        BadJSON("nul", "unexpected character 'n', expected a value", byteOffset: 0, column: 1),
        BadJSON("NaN", "unexpected character 'N', expected a value", byteOffset: 0, column: 1),
        // Numbers.
        BadJSON("01", "numbers must not have leading zeros", byteOffset: 1, column: 2),
        BadJSON("-01", "numbers must not have leading zeros", byteOffset: 2, column: 3),
        BadJSON("[00]", "numbers must not have leading zeros", byteOffset: 2, column: 3),
        BadJSON("-", "expected a digit in a number, found end of input", byteOffset: 1, column: 2),
        BadJSON("-a", "expected a digit in a number, found 'a'", byteOffset: 1, column: 2),
        BadJSON("+1", "unexpected character '+', expected a value", byteOffset: 0, column: 1),
        BadJSON(".5", "unexpected character '.', expected a value", byteOffset: 0, column: 1),
        BadJSON("1.", "expected a digit after '.' in a number", byteOffset: 2, column: 3),
        BadJSON("1.e5", "expected a digit after '.' in a number", byteOffset: 2, column: 3),
        BadJSON("1e", "expected a digit in a number's exponent", byteOffset: 2, column: 3),
        BadJSON("1e+", "expected a digit in a number's exponent", byteOffset: 3, column: 4),
        // Strings.
        BadJSON(#""abc"#, "unterminated string", byteOffset: 0, column: 1),
        BadJSON(#"{"a":"abc}"#, "unterminated string", byteOffset: 5, column: 6),
        BadJSON("\"a\tb\"", "control character 0x9 must be escaped in a string", byteOffset: 2, column: 3),
        BadJSON("[\"line\nbreak\"]", "control character 0xa must be escaped in a string", byteOffset: 6, column: 7),
        BadJSON("\"\u{0}\"", "control character 0x0 must be escaped in a string", byteOffset: 1, column: 2),
        BadJSON(#""\x""#, "invalid escape 'x' in a string", byteOffset: 2, column: 3),
        BadJSON(#""\U00e9""#, "invalid escape 'U' in a string", byteOffset: 2, column: 3),
        BadJSON(#""\"#, "unterminated escape", byteOffset: 2, column: 3),
        BadJSON(#""\u12""#, "incomplete \\u escape", byteOffset: 3, column: 4),
        BadJSON(#""\u12G4""#, "invalid hex digit 'G' in \\u escape", byteOffset: 5, column: 6),
        // Lone and mismatched surrogates.
        BadJSON(#""\ud83d""#, "unpaired UTF-16 surrogate in \\u escape", byteOffset: 7, column: 8),
        BadJSON(#""\ud83dx""#, "unpaired UTF-16 surrogate in \\u escape", byteOffset: 7, column: 8),
        BadJSON(#""\ud83d\n""#, "unpaired UTF-16 surrogate in \\u escape", byteOffset: 7, column: 8),
        BadJSON(#""\ude00""#, "unpaired UTF-16 surrogate in \\u escape", byteOffset: 7, column: 8),
        BadJSON(#""\ud83d\u0041""#, "invalid UTF-16 low surrogate in \\u escape", byteOffset: 13, column: 14),
        BadJSON(#""\ud83d\ud83d""#, "invalid UTF-16 low surrogate in \\u escape", byteOffset: 13, column: 14),
        // Invalid UTF-8 is reported at the string's opening quote.
        BadJSON(bytes: [0x22, 0x61, 0xFF, 0x62, 0x22], "string is not valid UTF-8", byteOffset: 0, column: 1),
        BadJSON(bytes: [0x22, 0xC3, 0x22], "string is not valid UTF-8", byteOffset: 0, column: 1),  // truncated sequence
        BadJSON(bytes: [0x22, 0xC0, 0xAF, 0x22], "string is not valid UTF-8", byteOffset: 0, column: 1),  // overlong "/"
        BadJSON(bytes: [0x22, 0xED, 0xA0, 0x80, 0x22], "string is not valid UTF-8", byteOffset: 0, column: 1),  // encoded surrogate
        BadJSON(bytes: [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22], "string is not valid UTF-8", byteOffset: 0, column: 1),  // > U+10FFFF
        BadJSON(
            bytes: Array("{\n  \"k\": \"".utf8) + [0xC3] + Array("\"}".utf8), "string is not valid UTF-8",
            byteOffset: 9, line: 2, column: 8
        ),
        BadJSON(bytes: [0xFF], "unexpected character byte 0xff, expected a value", byteOffset: 0, column: 1),
        // A byte-order mark is not white space.
        BadJSON(bytes: [0xEF, 0xBB, 0xBF, 0x7B, 0x7D], "unexpected character byte 0xef, expected a value", byteOffset: 0, column: 1),
        // Trailing garbage.
        BadJSON("{} x", "unexpected text after the JSON value", byteOffset: 3, column: 4),
        BadJSON("truex", "unexpected text after the JSON value", byteOffset: 4, column: 5),
        BadJSON("1 2", "unexpected text after the JSON value", byteOffset: 2, column: 3),
        BadJSON("[]]", "unexpected text after the JSON value", byteOffset: 2, column: 3),
        BadJSON("{}\n\n  ,", "unexpected text after the JSON value", byteOffset: 6, line: 3, column: 3),
        // Too deep: the 65th container is refused where it opens.
        BadJSON(nested(65, open: "[", close: "]"), "nested deeper than 64 levels", byteOffset: 64, column: 65),
        BadJSON(
            nested(65, open: #"{"a":"#, close: "}", inner: "1"), "nested deeper than 64 levels",
            byteOffset: 64 * 5, column: 64 * 5 + 1
        ),
    ])
    fileprivate func rejectsInvalidDocumentsAtTheRightPlace(bad: BadJSON) {
        let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(bad.bytes) }
        #expect(error?.reason == bad.reason)
        #expect(error?.byteOffset == bad.byteOffset)
        #expect(error?.line == bad.line)
        #expect(error?.column == bad.column)
    }

    @Test func reportsLineAndColumnInAMultiLineDocument() {
        let text = "{\n  \"a\": 1,\n  \"b\" 2\n}"
        let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
        #expect(error?.byteOffset == 18)
        #expect(error?.line == 3)
        #expect(error?.column == 7)
        #expect(error?.description == #"invalid JSON at line 3, column 7 (byte 18): expected ':' after the key "b", found '2'"#)
    }

    @Test func columnsCountBytesNotCharacters() {
        // "门" is three UTF-8 bytes, so the stray comma after it sits at byte 8, column 9.
        let text = "[\"门\" ,,]"
        let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
        #expect(error?.byteOffset == 8)
        #expect(error?.column == 9)
        #expect(error?.reason == "unexpected character ',', expected a value")
    }

    @Test func stringAndByteEntryPointsAgree() throws {
        let text = #"{"aps":{"alert":"门铃 \u00e9 😀"}}"#
        let fromString = try JSONParser.parse(text)
        let fromBytes = try JSONParser.parse(Array(text.utf8))
        let fromSlice = try JSONParser.parse(Array(("xx" + text).utf8)[2...])
        #expect(fromString == fromBytes)
        #expect(fromString == fromSlice)
        #expect(fromString["aps"]?["alert"] == .string("门铃 é 😀"))
    }
}
