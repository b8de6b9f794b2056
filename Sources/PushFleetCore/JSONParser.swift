/// A strict RFC 8259 parser: one value, optional surrounding white space, nothing else. Strings must
/// be valid UTF-8. Errors carry the byte offset, line and column of the problem.
public struct JSONParser {
    /// The deepest nesting accepted, so that hostile input cannot exhaust the stack.
    public static let maximumDepth = 64

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Parses `bytes` as one JSON value.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(Array(bytes))
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == parser.bytes.count else { throw parser.error("unexpected text after the JSON value") }
        return value
    }

    /// Parses a string as one JSON value.
    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try self.parse(Array(text.utf8))
    }

    private mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard self.index < self.bytes.count else { throw self.error("unexpected end of input, expected a value") }
        switch self.bytes[self.index] {
        case UInt8(ascii: "{"): return try self.parseObject()
        case UInt8(ascii: "["): return try self.parseArray()
        case UInt8(ascii: "\""): return .string(try self.parseString())
        case UInt8(ascii: "t"): try self.expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try self.expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try self.expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try self.parseNumber())
        default: throw self.error("unexpected character \(self.describeCurrent()), expected a value")
        }
    }

    private mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try self.enterContainer()
        self.index += 1  // {
        var members: [(key: String, value: JSONValue)] = []
        self.skipWhitespace()
        if self.peek() == UInt8(ascii: "}") {
            self.index += 1
            self.depth -= 1
            return .object(members)
        }
        while true {
            self.skipWhitespace()
            guard self.peek() == UInt8(ascii: "\"") else { throw self.error("expected a string key in an object, found \(self.describeCurrent())") }
            let key = try self.parseString()
            self.skipWhitespace()
            guard self.peek() == UInt8(ascii: ":") else { throw self.error("expected ':' after the key \"\(key)\", found \(self.describeCurrent())") }
            self.index += 1
            self.skipWhitespace()
            members.append((key, try self.parseValue()))
            self.skipWhitespace()
            switch self.peek() {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "}"):
                self.index += 1
                self.depth -= 1
                return .object(members)
            default: throw self.error("expected ',' or '}' in an object, found \(self.describeCurrent())")
            }
        }
    }

    private mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try self.enterContainer()
        self.index += 1  // [
        var elements: [JSONValue] = []
        self.skipWhitespace()
        if self.peek() == UInt8(ascii: "]") {
            self.index += 1
            self.depth -= 1
            return .array(elements)
        }
        while true {
            self.skipWhitespace()
            elements.append(try self.parseValue())
            self.skipWhitespace()
            switch self.peek() {
            case UInt8(ascii: ","): self.index += 1
            case UInt8(ascii: "]"):
                self.index += 1
                self.depth -= 1
                return .array(elements)
            default: throw self.error("expected ',' or ']' in an array, found \(self.describeCurrent())")
            }
        }
    }

    private mutating func enterContainer() throws(JSONParseError) {
        self.depth += 1
        guard self.depth <= Self.maximumDepth else { throw self.error("nested deeper than \(Self.maximumDepth) levels") }
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        let start = self.index
        self.index += 1  // opening quote
        var utf8: [UInt8] = []
        while true {
            guard self.index < self.bytes.count else {
                self.index = start
                throw self.error("unterminated string")
            }
            let byte = self.bytes[self.index]
            switch byte {
            case UInt8(ascii: "\""):
                self.index += 1
                guard let text = String(validating: utf8, as: UTF8.self) else {
                    self.index = start
                    throw self.error("string is not valid UTF-8")
                }
                return text
            case UInt8(ascii: "\\"):
                self.index += 1
                guard self.index < self.bytes.count else { throw self.error("unterminated escape") }
                let escaped = self.bytes[self.index]
                self.index += 1
                switch escaped {
                case UInt8(ascii: "\""): utf8.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): utf8.append(UInt8(ascii: "\\"))
                case UInt8(ascii: "/"): utf8.append(UInt8(ascii: "/"))
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0C)
                case UInt8(ascii: "n"): utf8.append(0x0A)
                case UInt8(ascii: "r"): utf8.append(0x0D)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try self.parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard self.peek() == UInt8(ascii: "\\"), self.peek(offset: 1) == UInt8(ascii: "u") else {
                            throw self.error("unpaired UTF-16 surrogate in \\u escape")
                        }
                        self.index += 2
                        let low = try self.parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw self.error("invalid UTF-16 low surrogate in \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw self.error("unpaired UTF-16 surrogate in \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw self.error("invalid \\u escape") }
                    utf8.append(contentsOf: String(Character(unicode)).utf8)
                default:
                    self.index -= 1
                    throw self.error("invalid escape \(self.describeCurrent()) in a string")
                }
            case 0x00..<0x20:
                throw self.error("control character 0x\(String(byte, radix: 16)) must be escaped in a string")
            default:
                utf8.append(byte)
                self.index += 1
            }
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard self.index + 4 <= self.bytes.count else { throw self.error("incomplete \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = self.bytes[self.index]
            let nibble: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = byte - UInt8(ascii: "A") + 10
            default: throw self.error("invalid hex digit \(self.describeCurrent()) in \\u escape")
            }
            value = value << 4 | UInt32(nibble)
            self.index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(JSONParseError) -> String {
        let start = self.index
        if self.peek() == UInt8(ascii: "-") { self.index += 1 }
        guard let first = self.peek(), self.isDigit(first) else { throw self.error("expected a digit in a number, found \(self.describeCurrent())") }
        if first == UInt8(ascii: "0") {
            self.index += 1
            if let next = self.peek(), self.isDigit(next) { throw self.error("numbers must not have leading zeros") }
        } else {
            self.skipDigits()
        }
        if self.peek() == UInt8(ascii: ".") {
            self.index += 1
            guard let next = self.peek(), self.isDigit(next) else { throw self.error("expected a digit after '.' in a number") }
            self.skipDigits()
        }
        if self.peek() == UInt8(ascii: "e") || self.peek() == UInt8(ascii: "E") {
            self.index += 1
            if self.peek() == UInt8(ascii: "+") || self.peek() == UInt8(ascii: "-") { self.index += 1 }
            guard let next = self.peek(), self.isDigit(next) else { throw self.error("expected a digit in a number's exponent") }
            self.skipDigits()
        }
        return String(decoding: self.bytes[start..<self.index], as: UTF8.self)
    }

    private mutating func expectLiteral(_ literal: String) throws(JSONParseError) {
        let expected = Array(literal.utf8)
        guard self.index + expected.count <= self.bytes.count,
            self.bytes[self.index..<self.index + expected.count].elementsEqual(expected)
        else { throw self.error("unexpected character \(self.describeCurrent()), expected a value") }
        self.index += expected.count
    }

    private func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    private mutating func skipDigits() {
        while let byte = self.peek(), self.isDigit(byte) { self.index += 1 }
    }

    private mutating func skipWhitespace() {
        while let byte = self.peek(), byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 { self.index += 1 }
    }

    private func peek(offset: Int = 0) -> UInt8? {
        self.index + offset < self.bytes.count ? self.bytes[self.index + offset] : nil
    }

    private func describeCurrent() -> String {
        guard let byte = self.peek() else { return "end of input" }
        return (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
    }

    private func error(_ reason: String) -> JSONParseError {
        var line = 1
        var column = 1
        for byte in self.bytes[..<min(self.index, self.bytes.count)] {
            if byte == 0x0A {
                line += 1
                column = 1
            } else {
                column += 1
            }
        }
        return JSONParseError(reason: reason, byteOffset: self.index, line: line, column: column)
    }
}

/// Why text is not JSON, and where.
public struct JSONParseError: Error, Hashable, Sendable, CustomStringConvertible {
    public let reason: String
    /// Zero-based offset of the problem in the input's bytes.
    public let byteOffset: Int
    public let line: Int
    public let column: Int

    public var description: String { "invalid JSON at line \(self.line), column \(self.column) (byte \(self.byteOffset)): \(self.reason)" }
}
