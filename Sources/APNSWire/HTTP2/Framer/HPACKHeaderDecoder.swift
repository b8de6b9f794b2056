public import NIOCore

/// One header field as decoded: its name and value.
public struct HTTP2HeaderField: Sendable, Hashable {
    public let name: String
    public let value: String
    /// Why a regular field breaks RFC 9113 §8.2 (an uppercase or non-token name, a
    /// connection-specific field, a value with NUL, CR or LF), or nil; nil for pseudo-headers, whose
    /// rules depend on where they stand. Found once, when the field is decoded as a literal: a field
    /// from the dynamic table carries its entry's.
    public let problem: String?

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
        self.problem = name.utf8.first == UInt8(ascii: ":") ? nil : Self.problem(name: name, value: value)
    }

    public var isPseudoHeader: Bool { self.name.utf8.first == UInt8(ascii: ":") }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.name == rhs.name && lhs.value == rhs.value }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(self.name)
        hasher.combine(self.value)
    }

    private static func problem(name: String, value: String) -> String? {
        guard !name.isEmpty, name.utf8.allSatisfy(Self.isLowercaseToken) else { return "header name \"\(name)\" is not a lowercase token" }
        switch name {
        case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade": return "connection-specific header \(name)"
        case "te" where value != "trailers": return "te: \(value)"
        default: break
        }
        guard value.utf8.allSatisfy({ $0 != 0 && $0 != 0x0A && $0 != 0x0D }) else { return "header \(name)'s value has NUL, CR or LF" }
        return nil
    }

    /// RFC 9110 §5.6.2 token characters, uppercase letters excluded.
    private static func isLowercaseToken(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"),
            UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

/// Reads whole header blocks (RFC 7541) into their fields: what a server of APNs requests needs.
/// Unlike ``HPACKAnswerDecoder`` it builds every name and value, and keeps them in its dynamic
/// table, so a field the client entered once costs an array copy of two strings afterwards.
public struct HPACKHeaderDecoder: Sendable {
    private var table: HPACKDynamicTable<HTTP2HeaderField>
    /// The dynamic table's size by RFC 7541's measure.
    public var size: Int { self.table.size }
    /// The table's current maximum, as the peer's size updates set it.
    public var maximumSize: Int { self.table.maximumSize }
    /// The most a size update may set: this side's `SETTINGS_HEADER_TABLE_SIZE`.
    public let allowedMaximumSize: Int

    /// - Parameter maximumSize: this side's `SETTINGS_HEADER_TABLE_SIZE` (4,096 unless announced).
    public init(maximumSize: Int = 4_096) {
        self.table = HPACKDynamicTable(maximumSize: maximumSize)
        self.allowedMaximumSize = maximumSize
    }

    /// Decodes a whole header block into its fields, in order, and returns the header list's size
    /// by RFC 9113's measure (each field's name and value and 32). Throws a COMPRESSION_ERROR for
    /// anything RFC 7541 forbids.
    public mutating func decode(_ block: ByteBuffer, into fields: inout [HTTP2HeaderField]) throws(HTTP2ConnectionError) -> Int {
        var block = block
        var listSize = 0
        var sawField = false
        while let first = block.readInteger(as: UInt8.self) {
            let field: HTTP2HeaderField
            if first & 0x80 != 0 {
                field = try self.field(at: try Self.integer(first, prefix: 7, &block))
            } else if first & 0xE0 == 0x20 {
                let size = try Self.integer(first, prefix: 5, &block)
                try self.table.update(maximumSize: size, allowed: self.allowedMaximumSize, afterField: sawField)
                continue
            } else {
                // A literal: with incremental indexing (01), without (0000) or never indexed (0001).
                let indexing = first & 0xC0 == 0x40
                let index = try Self.integer(first, prefix: indexing ? 6 : 4, &block)
                let name = index == 0 ? try Self.string(&block) : try self.field(at: index).name
                field = HTTP2HeaderField(name, try Self.string(&block))
                if indexing { self.table.insert(field, size: field.name.utf8.count + field.value.utf8.count + 32) }
            }
            sawField = true
            listSize += field.name.utf8.count + field.value.utf8.count + 32
            fields.append(field)
        }
        return listSize
    }

    private func field(at index: Int) throws(HTTP2ConnectionError) -> HTTP2HeaderField {
        guard index > 0 else { throw Self.error("an indexed field with index 0") }
        if index <= HPACKStaticTable.fields.count { return HPACKStaticTable.fields[index - 1] }
        guard let field = self.table[index: index] else {
            throw Self.error("index \(index) beyond the dynamic table's \(self.table.count) entries")
        }
        return field
    }

    // MARK: - Primitives

    static func error(_ reason: String) -> HTTP2ConnectionError {
        HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.compressionError, "HPACK: \(reason)")
    }

    /// An integer with a `prefix`-bit prefix whose first byte is `first` (RFC 7541 §5.1).
    static func integer(_ first: UInt8, prefix: Int, _ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> Int {
        let mask = UInt8(1 << prefix - 1)
        var value = Int(first & mask)
        guard value == Int(mask) else { return value }
        var shift = 0
        while true {
            guard let byte = block.readInteger(as: UInt8.self) else { throw Self.error("an integer cut off at the block's end") }
            guard shift <= 21 else { throw Self.error("an integer above 2^28") }
            value += Int(byte & 0x7F) << shift
            shift += 7
            if byte & 0x80 == 0 { return value }
        }
    }

    /// Reads a string literal's length prefix and returns the Huffman flag and its bytes.
    static func stringBytes(_ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> (huffman: Bool, bytes: ByteBuffer) {
        guard let first = block.readInteger(as: UInt8.self) else { throw Self.error("a string missing at the block's end") }
        let length = try Self.integer(first, prefix: 7, &block)
        guard let bytes = block.readSlice(length: length) else {
            throw Self.error("a string of \(length) bytes with \(block.readableBytes) left in the block")
        }
        return (first & 0x80 != 0, bytes)
    }

    /// Decodes Huffman-coded `bytes`, handing each symbol to `body` in order.
    static func huffman(_ bytes: ByteBuffer, _ body: (UInt8) -> Void) throws(HTTP2ConnectionError) {
        do {
            try bytes.withUnsafeReadableBytes { raw throws(HPACKHuffman.DecodingError) in try HPACKHuffman.decode(raw, body) }
        } catch {
            throw Self.error(error == .endOfString ? "a Huffman string containing EOS" : "a Huffman string badly padded")
        }
    }

    /// A string literal (RFC 7541 §5.2), raw or Huffman-coded.
    static func string(_ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> String {
        let (huffman, bytes) = try Self.stringBytes(&block)
        guard huffman else { return String(buffer: bytes) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.readableBytes * 8 / 5)
        try Self.huffman(bytes) { decoded.append($0) }
        return String(decoding: decoded, as: UTF8.self)
    }
}

/// HPACK's static table (RFC 7541 Appendix A): index 1 is `fields[0]`.
enum HPACKStaticTable {
    static let fields: [HTTP2HeaderField] = [
        (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
        (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
        (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
        ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""), ("cache-control", ""),
        ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
        ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""), ("date", ""),
        ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""), ("if-match", ""),
        ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""), ("if-unmodified-since", ""),
        ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""), ("proxy-authenticate", ""),
        ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""), ("retry-after", ""),
        ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""), ("transfer-encoding", ""),
        ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
    ].map { HTTP2HeaderField($0.0, $0.1) }
}
