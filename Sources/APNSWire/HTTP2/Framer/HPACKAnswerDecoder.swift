public import NIOCore

/// Reads the header blocks of APNs' answers for the one header a sender acts on, `:status`, and
/// keeps HPACK's decoding state (RFC 7541) right for every other field without building it.
///
/// The dynamic table holds for each entry only its name's length and, for a `:status` entry, the
/// status: a later reference needs no more. Strings are decoded only when that matters: a `:status`
/// value, a literal name (is it `:status`?), and the length of a string entered in a table that has
/// room. A client that announces `SETTINGS_HEADER_TABLE_SIZE` 0 (as ``HTTP2ClientFramer`` does)
/// empties the peer's table once the peer has read those settings, and an answer of `:status` 200
/// and an `apns-id` then costs a byte, two length prefixes and a skip.
public struct HPACKAnswerDecoder: Sendable {
    private struct Entry: Sendable {
        var nameLength: Int
        /// The value, when the entry's name is `:status`; -1 when it is not a number.
        var status: Int?
    }

    private var table: HPACKDynamicTable<Entry>
    /// The dynamic table's size by RFC 7541's measure (each entry's name and value and 32 bytes).
    public var size: Int { self.table.size }
    /// The table's current maximum, set by the peer's size updates.
    public var maximumSize: Int { self.table.maximumSize }
    /// The most a size update may set: the largest `SETTINGS_HEADER_TABLE_SIZE` this side has
    /// announced and not yet seen acknowledged, or the acknowledged one.
    public var allowedMaximumSize: Int

    /// - Parameter maximumSize: the table size before any SETTINGS (4,096 by RFC 7541).
    public init(maximumSize: Int = 4_096) {
        self.table = HPACKDynamicTable(maximumSize: maximumSize)
        self.allowedMaximumSize = maximumSize
    }

    private static let statusName: [UInt8] = Array(":status".utf8)

    /// Decodes a whole header block; returns its `:status` (the last, if several), or nil when it
    /// has none. Throws a COMPRESSION_ERROR for anything RFC 7541 forbids in what it decodes. The
    /// Huffman-coded strings it has no use for are skipped by length, not decoded, so bad padding
    /// or an EOS symbol inside one of them (an error by RFC 7541 §5.2) goes unnoticed: nothing is
    /// read from them, and the block's lengths and table are still checked. (Found by the fuzz
    /// target `FuzzHTTP2Answer`, which compares this decoder with ``HPACKHeaderDecoder``.)
    public mutating func status(of block: ByteBuffer) throws(HTTP2ConnectionError) -> Int? {
        var block = block
        var status: Int?
        var sawField = false
        while let first = block.readInteger(as: UInt8.self) {
            if first & 0x80 != 0 {
                // Indexed field.
                let index = try Self.integer(first, prefix: 7, &block)
                if let value = try self.status(at: index) { status = value }
                sawField = true
            } else if first & 0xE0 == 0x20 {
                // Dynamic table size update: only before the block's first field.
                let size = try Self.integer(first, prefix: 5, &block)
                try self.table.update(maximumSize: size, allowed: self.allowedMaximumSize, afterField: sawField)
            } else {
                // A literal: with incremental indexing (01), without (0000) or never indexed (0001).
                let indexing = first & 0xC0 == 0x40
                let index = try Self.integer(first, prefix: indexing ? 6 : 4, &block)
                let nameLength: Int
                let isStatus: Bool
                if index == 0 {
                    (nameLength, isStatus) = try self.literalName(&block)
                } else {
                    (nameLength, isStatus) = try self.name(at: index)
                }
                let entered = indexing && self.maximumSize > 0
                var value: Int?
                let valueLength = try Self.string(&block, parseStatus: isStatus, needLength: entered, status: &value)
                if isStatus { status = value ?? -1 }
                if entered { self.table.insert(Entry(nameLength: nameLength, status: isStatus ? (value ?? -1) : nil), size: nameLength + valueLength + 32) }
                sawField = true
            }
        }
        return status
    }

    // MARK: - The tables

    /// The status an indexed field sets, or nil for a field that is not `:status`.
    private func status(at index: Int) throws(HTTP2ConnectionError) -> Int? {
        switch index {
        case 0: throw Self.error("an indexed field with index 0")
        case 8...14: return Self.staticStatuses[index - 8]
        case 1...61: return nil
        default: return try self.entry(at: index).status
        }
    }

    /// The decoded length of the name at `index`, and whether it is `:status`.
    private func name(at index: Int) throws(HTTP2ConnectionError) -> (length: Int, isStatus: Bool) {
        if index <= 61 { return (Self.staticNameLengths[index - 1], (8...14).contains(index)) }
        let entry = try self.entry(at: index)
        return (entry.nameLength, entry.status != nil)
    }

    private func entry(at index: Int) throws(HTTP2ConnectionError) -> Entry {
        guard let entry = self.table[index: index] else {
            throw Self.error("index \(index) beyond the dynamic table's \(self.table.count) entries")
        }
        return entry
    }

    // MARK: - Primitives

    private static func error(_ reason: String) -> HTTP2ConnectionError { HPACKHeaderDecoder.error(reason) }

    private static func integer(_ first: UInt8, prefix: Int, _ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> Int {
        try HPACKHeaderDecoder.integer(first, prefix: prefix, &block)
    }

    private static func stringBytes(_ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> (huffman: Bool, bytes: ByteBuffer) {
        try HPACKHeaderDecoder.stringBytes(&block)
    }

    /// A literal name: its decoded length and whether it is `:status`. Every answer of a server
    /// without a dynamic table names `apns-id` so: the last few Huffman-coded names are remembered.
    private mutating func literalName(_ block: inout ByteBuffer) throws(HTTP2ConnectionError) -> (Int, Bool) {
        let (huffman, bytes) = try Self.stringBytes(&block)
        guard huffman else { return (bytes.readableBytes, bytes.readableBytesView.elementsEqual(Self.statusName)) }
        for known in self.knownNames where bytes.readableBytesView.elementsEqual(known.coded) {
            return (known.length, known.isStatus)
        }
        var length = 0
        var matches = true
        try Self.huffman(bytes) { symbol in
            matches = matches && length < Self.statusName.count && Self.statusName[length] == symbol
            length += 1
        }
        let isStatus = matches && length == Self.statusName.count
        if self.knownNames.count == 4 { self.knownNames.removeFirst() }
        self.knownNames.append((Array(bytes.readableBytesView), length, isStatus))
        return (length, isStatus)
    }

    /// Huffman-coded names decoded lately: their bytes, decoded length and whether they are `:status`.
    private var knownNames: [(coded: [UInt8], length: Int, isStatus: Bool)] = []

    /// A value: its decoded length (computed only when `needLength` or `parseStatus`), and when
    /// `parseStatus`, `status` set to its number (nil when not three digits).
    private static func string(
        _ block: inout ByteBuffer, parseStatus: Bool, needLength: Bool, status: inout Int?
    ) throws(HTTP2ConnectionError) -> Int {
        let (huffman, bytes) = try Self.stringBytes(&block)
        guard parseStatus || (needLength && huffman) else { return bytes.readableBytes }
        var number = 0
        var length = 0
        var digits = true
        let add = { (symbol: UInt8) in
            digits = digits && symbol >= UInt8(ascii: "0") && symbol <= UInt8(ascii: "9")
            if digits, length < 3 { number = number * 10 + Int(symbol &- UInt8(ascii: "0")) }
            length += 1
        }
        if huffman {
            try Self.huffman(bytes, add)
        } else {
            for symbol in bytes.readableBytesView { add(symbol) }
        }
        if parseStatus { status = digits && length == 3 ? number : nil }
        return length
    }

    private static func huffman(_ bytes: ByteBuffer, _ body: (UInt8) -> Void) throws(HTTP2ConnectionError) {
        try HPACKHeaderDecoder.huffman(bytes, body)
    }

    private static let staticStatuses = [200, 204, 206, 304, 400, 404, 500]

    /// The lengths of the static table's names, index 1 to 61 (RFC 7541 Appendix A).
    private static let staticNameLengths: [Int] = HPACKStaticTable.fields.map(\.name.utf8.count)
}
