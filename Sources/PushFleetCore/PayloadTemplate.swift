/// A payload with placeholders, rendered for each recipient from the fields of its audience line:
/// `{"aps":{"alert":"Hi {{first_name|there}}, {{offer}} today"}}`.
///
/// A placeholder is `{{name}}` or `{{name|fallback}}` inside a JSON string of the payload: `name`
/// is 1 to 64 letters, digits or `_` (spaces around it allowed); the fallback, text as the string
/// holds it, stands where the recipient has no value or an empty one (nothing without one). A
/// value is written JSON-escaped, so every rendering is valid JSON whatever the value holds.
public struct PayloadTemplate: Sendable, Hashable {
    public enum Segment: Sendable, Hashable {
        /// Bytes of the payload as they are.
        case text([UInt8])
        /// The value of ``PayloadTemplate/fields`` at `field`, or else `fallback` (bytes of a JSON
        /// string's inside, as written).
        case field(Int, fallback: [UInt8])
    }

    /// The payload cut at its placeholders.
    public let segments: [Segment]
    /// The fields the placeholders name, each once, in order of first use.
    public let fields: [String]
    /// The bytes of the text segments, and each placeholder's field and fallback size.
    private let textSize: Int
    private let placeholderFallbacks: [(field: Int, size: Int)]

    public static func == (a: Self, b: Self) -> Bool { a.segments == b.segments && a.fields == b.fields }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.segments) }

    /// The most placeholders one payload may have.
    public static let maximumPlaceholders = 64

    /// The template of `payload`, or nil when it has no placeholder (it is then sent as it is).
    /// - Throws: ``PayloadTemplateError`` for a placeholder that is not closed in its string, or
    ///   whose name is not 1 to 64 letters, digits or `_`, or for too many placeholders.
    public init?(_ payload: [UInt8]) throws(PayloadTemplateError) {
        var segments: [Segment] = []
        var fields: [String] = []
        var text: [UInt8] = []
        var inString = false
        var index = 0
        var placeholders = 0
        // Where the placeholder of the current string is, if it has one.
        var placeholderInString: Int? = nil
        while index < payload.count {
            let byte = payload[index]
            if !inString {
                if byte == UInt8(ascii: "\"") { inString = true }
                text.append(byte)
                index += 1
                continue
            }
            switch byte {
            case UInt8(ascii: "\\"):
                // An escape: it and the byte after it are text (`\u` digits follow as text too).
                text.append(byte)
                if index + 1 < payload.count { text.append(payload[index + 1]) }
                index += 2
            case UInt8(ascii: "\""):
                inString = false
                text.append(byte)
                index += 1
                // A string followed by a colon is a member's name: no placeholder there, or a
                // recipient's value could name a member twice.
                if let start = placeholderInString {
                    var next = index
                    while next < payload.count, [0x20, 0x09, 0x0A, 0x0D].contains(payload[next]) { next += 1 }
                    if next < payload.count, payload[next] == UInt8(ascii: ":") {
                        throw PayloadTemplateError("the placeholder at byte \(start) is in a member's name; placeholders go in string values")
                    }
                    placeholderInString = nil
                }
            case UInt8(ascii: "{") where index + 1 < payload.count && payload[index + 1] == UInt8(ascii: "{"):
                let start = index
                guard let close = Self.closing(payload, from: index + 2) else {
                    throw PayloadTemplateError("the placeholder at byte \(start) is not closed with }} in its string")
                }
                let inside = Array(payload[(index + 2)..<close])
                let bar = inside.firstIndex(of: UInt8(ascii: "|"))
                let name = String(decoding: inside[..<(bar ?? inside.endIndex)], as: UTF8.self).trimmingSpaces
                let fallback = bar.map { Array(inside[($0 + 1)...]) } ?? []
                guard (1...64).contains(name.utf8.count),
                    name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F })
                else {
                    throw PayloadTemplateError("the placeholder at byte \(start) names \"\(name.prefix(70))\": a field's name is 1 to 64 letters, digits or _")
                }
                placeholders += 1
                placeholderInString = placeholderInString ?? start
                guard placeholders <= Self.maximumPlaceholders else {
                    throw PayloadTemplateError("more than \(Self.maximumPlaceholders) placeholders")
                }
                if !text.isEmpty {
                    segments.append(.text(text))
                    text = []
                }
                let field: Int
                if let known = fields.firstIndex(of: name) {
                    field = known
                } else {
                    fields.append(name)
                    field = fields.count - 1
                }
                segments.append(.field(field, fallback: fallback))
                index = close + 2
            default:
                text.append(byte)
                index += 1
            }
        }
        guard placeholders > 0 else { return nil }
        if !text.isEmpty { segments.append(.text(text)) }
        self.segments = segments
        self.fields = fields
        var textSize = 0
        var fallbacks: [(field: Int, size: Int)] = []
        for segment in segments {
            switch segment {
            case .text(let bytes): textSize += bytes.count
            case .field(let field, let fallback): fallbacks.append((field, fallback.count))
            }
        }
        self.textSize = textSize
        self.placeholderFallbacks = fallbacks
    }

    /// The payload for a recipient whose values of ``fields`` are `values` (nil or empty: the
    /// placeholder's fallback).
    /// - Precondition: `values.count == fields.count`.
    public func render(_ values: [String?]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(self.renderedSize(values))
        for segment in self.segments {
            switch segment {
            case .text(let bytes): out.append(contentsOf: bytes)
            case .field(let field, let fallback):
                if let value = values[field], !value.isEmpty { Self.escape(value, into: &out) } else { out.append(contentsOf: fallback) }
            }
        }
        return out
    }

    /// The size of ``render(_:)``'s result, without rendering.
    public func renderedSize(_ values: [String?]) -> Int {
        var size = 0
        for segment in self.segments {
            switch segment {
            case .text(let bytes): size += bytes.count
            case .field(let field, let fallback):
                if let value = values[field], !value.isEmpty { size += Self.escapedSize(value) } else { size += fallback.count }
            }
        }
        return size
    }

    // MARK: - Packed values: what a shard stores per recipient

    /// A recipient's values of ``fields`` as a shard stores them: per field, in order, the value
    /// already JSON-escaped, after its length as an unsigned LEB128 (one byte below 128); an empty
    /// value (length 0) stands for none. Rendering from it only copies bytes.
    public func pack(_ values: [String?]) -> [UInt8] {
        self.pack { $0 < values.count ? values[$0] : nil }.packed
    }

    /// Packs `value(i)`, the recipient's value of field `i`, for each field, and gives the size of
    /// the payload they render to: what a launch does for every recipient, without allocating
    /// more than the packing.
    public func pack(_ value: (Int) throws -> String?) rethrows -> (packed: [UInt8], renderedSize: Int) {
        var packed: [UInt8] = []
        packed.reserveCapacity(self.fields.count * 16)
        let size = try self.packFields(into: &packed) { try Self.utf8(of: value, $0, $1) }
        return (packed, size)
    }

    /// Appends to `out` the values `value(i)` packed, with their length in LEB128 first (as
    /// ``RecipientValueList`` keeps a recipient's), and returns the rendered size.
    func pack(into out: inout [UInt8], _ value: (Int) throws -> String?) rethrows -> Int {
        try self.pack(into: &out) { try Self.utf8(of: value, $0, $1) }
    }

    /// ``pack(into:_:)`` from each field's value as UTF-8 bytes, `utf8(i)` (nil or empty: none),
    /// without making a string of it: what a launch from an audience file does per recipient.
    func pack(into out: inout [UInt8], utf8 value: (Int) -> UnsafeBufferPointer<UInt8>?) -> Int {
        self.pack(into: &out) { field, body in body(value(field)) }
    }

    /// Appends the values `withValue(i, body)` hands to `body` (UTF-8; nil for none) packed, after
    /// their length in LEB128; returns the rendered size.
    private func pack(
        into out: inout [UInt8], _ withValue: (Int, (UnsafeBufferPointer<UInt8>?) -> Void) throws -> Void
    ) rethrows -> Int {
        // The length first: one byte while the packing is under 128 bytes, moved on if it is not.
        let lengthAt = out.count
        out.append(0)
        let size = try self.packFields(into: &out, withValue)
        let packedLength = out.count - lengthAt - 1
        if packedLength < 0x80 {
            out[lengthAt] = UInt8(packedLength)
        } else {
            var prefix: [UInt8] = []
            LEB128.append(packedLength, to: &prefix)
            out.replaceSubrange(lengthAt..<(lengthAt + 1), with: prefix)
        }
        return size
    }

    /// Hands the UTF-8 of `value(field)` to `body` (nil for none).
    private static func utf8(of value: (Int) throws -> String?, _ field: Int, _ body: (UnsafeBufferPointer<UInt8>?) -> Void) rethrows {
        guard var text = try value(field) else { return body(nil) }
        text.withUTF8 { body($0) }
    }

    /// Appends each field's value, handed by `withValue(i, body)` to `body` as UTF-8 (nil or empty:
    /// none), escaped after its length; returns the rendered size.
    private func packFields(
        into out: inout [UInt8], _ withValue: (Int, (UnsafeBufferPointer<UInt8>?) -> Void) throws -> Void
    ) rethrows -> Int {
        var size = self.textSize
        for field in self.fields.indices {
            var length = 0
            try withValue(field) { utf8 in
                guard let utf8, !utf8.isEmpty else { return out.append(0) }
                length = Self.escapedSize(utf8)
                LEB128.append(length, to: &out)
                if length == utf8.count { out.append(contentsOf: utf8) } else { Self.escape(utf8, into: &out) }
            }
            for use in self.placeholderFallbacks where use.field == field { size += length > 0 ? length : use.size }
        }
        return size
    }

    /// The payload for a recipient whose values ``pack(_:)`` made, or nil when `packed` is not
    /// such values for this template's fields.
    public func render(packed: some Collection<UInt8>) -> [UInt8]? {
        let rendered = packed.withContiguousStorageIfAvailable { self.render(packedBytes: UnsafeRawBufferPointer($0)) }
        return rendered ?? Array(packed).withUnsafeBytes { self.render(packedBytes: $0) }
    }

    /// The size of ``render(packed:)``'s result without rendering, or nil as there.
    public func renderedSize(packed: some Collection<UInt8>) -> Int? {
        let size = packed.withContiguousStorageIfAvailable { self.unpack(UnsafeRawBufferPointer($0)).map(self.renderedSize(_:)) }
        return size ?? Array(packed).withUnsafeBytes { self.unpack($0).map(self.renderedSize(_:)) }
    }

    private func render(packedBytes raw: UnsafeRawBufferPointer) -> [UInt8]? {
        guard let ranges = self.unpack(raw) else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(self.renderedSize(ranges))
        for segment in self.segments {
            switch segment {
            case .text(let bytes): out.append(contentsOf: bytes)
            case .field(let field, let fallback):
                let range = ranges[field]
                if range.isEmpty { out.append(contentsOf: fallback) } else { out.append(contentsOf: raw[range]) }
            }
        }
        return out
    }

    /// Where each field's value lies in `raw` (one range per field, empty for none), or nil when
    /// `raw` does not hold exactly one length and value per field.
    private func unpack(_ raw: UnsafeRawBufferPointer) -> [Range<Int>]? {
        var values: [Range<Int>] = []
        values.reserveCapacity(self.fields.count)
        var index = 0
        for _ in self.fields.indices {
            guard let length = LEB128.read(raw, at: &index) else { return nil }
            guard length <= raw.count - index else { return nil }
            values.append(index..<(index + length))
            index += length
        }
        guard index == raw.count else { return nil }
        return values
    }

    private func renderedSize(_ ranges: [Range<Int>]) -> Int {
        var size = 0
        for segment in self.segments {
            switch segment {
            case .text(let bytes): size += bytes.count
            case .field(let field, let fallback):
                let range = ranges[field]
                size += range.isEmpty ? fallback.count : range.count
            }
        }
        return size
    }

    /// Where the `}}` that closes a placeholder starts, if it does in the same string.
    private static func closing(_ payload: [UInt8], from start: Int) -> Int? {
        var index = start
        while index + 1 < payload.count {
            switch payload[index] {
            case UInt8(ascii: "}") where payload[index + 1] == UInt8(ascii: "}"): return index
            case UInt8(ascii: "\""): return nil  // the string ended first
            case UInt8(ascii: "\\"): index += 2
            default: index += 1
            }
        }
        return nil
    }

    /// `value` as the inside of a JSON string: `"`, `\` and control characters escaped, the rest
    /// UTF-8 as it is.
    static func escape(_ value: String, into out: inout [UInt8]) {
        var value = value
        value.withUTF8 { Self.escape($0, into: &out) }
    }

    static func escape(_ utf8: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
            case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
            default: out.append(byte)
            }
        }
    }

    static func escapedSize(_ value: String) -> Int {
        var value = value
        return value.withUTF8 { Self.escapedSize($0) }
    }

    static func escapedSize(_ utf8: UnsafeBufferPointer<UInt8>) -> Int {
        var size = utf8.count
        for byte in utf8 where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
            size += byte == 0x0A || byte == 0x0D || byte == 0x09 || byte >= 0x20 ? 1 : 5
        }
        return size
    }
}

/// Why a payload's placeholders were refused.
public struct PayloadTemplateError: Error, Hashable, Sendable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}

extension String {
    fileprivate var trimmingSpaces: String {
        var scalars = Substring(self)
        while scalars.first == " " { scalars.removeFirst() }
        while scalars.last == " " { scalars.removeLast() }
        return String(scalars)
    }
}
