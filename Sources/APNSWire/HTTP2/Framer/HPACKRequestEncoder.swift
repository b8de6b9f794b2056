public import NIOCore
public import PushFleetCore
import NIOHPACK

/// Writes the header blocks of APNs requests (RFC 7541), with the HPACK state kept by hand.
///
/// A campaign's requests differ only in `:path`. The other fields (`:method`, `:scheme`,
/// `:authority`, the template's `apns-*` and `content-length`, `authorization`) are entered in the
/// peer's dynamic table by the first request and named by index from then on, so every later block
/// is `:path` as a literal never entered in the table (it would push the stable fields out) and a
/// few index bytes copied from a cache. The cache holds while the table does not change: until the
/// template, the provider token or the peer's `SETTINGS_HEADER_TABLE_SIZE` changes.
///
/// Strings are written raw: Huffman coding would save a fifth of `:path`'s bytes at a CPU cost per
/// request larger than writing them.
public struct HPACKRequestEncoder: Sendable {
    struct Field: Sendable, Hashable {
        var name: [UInt8]
        var value: [UInt8]
        /// The static table's index of this name and value, or 0.
        var staticIndex: Int
        /// The static table's index of this name, or 0.
        var staticNameIndex: Int

        var size: Int { self.name.count + self.value.count + 32 }
    }

    private let authority: [UInt8]
    /// This encoder's model of the peer's table.
    private var table = HPACKDynamicTable<Field>(maximumSize: Self.preferredMaximumSize)
    /// The table's maximum: the peer's `SETTINGS_HEADER_TABLE_SIZE` up to ``preferredMaximumSize``.
    public var maximumSize: Int { self.table.maximumSize }
    /// The smallest maximum since the last block, to signal at the start of the next one before
    /// the current maximum when the maximum changed (RFC 7541 §4.2).
    private var pendingSizeUpdate: Int?
    /// The most table this encoder uses, whatever the peer allows.
    public static let preferredMaximumSize = 4_096

    private var cachedTemplate: HTTP2NotificationTemplate?
    private var cachedAuthorization: String?
    private var fields: [Field] = []
    /// The encoded fields, once encoding them no longer changes the table.
    private var stableBlock: ByteBuffer?

    /// - Parameter authority: `:authority`, the host (and `:port` unless 443).
    public init(authority: String) {
        self.authority = Array(authority.utf8)
    }

    /// Applies the peer's `SETTINGS_HEADER_TABLE_SIZE`.
    public mutating func peerAllows(headerTableSize: Int) {
        let maximum = min(headerTableSize, Self.preferredMaximumSize)
        guard maximum != self.maximumSize else { return }
        self.table.maximumSize = maximum
        self.pendingSizeUpdate = min(self.pendingSizeUpdate ?? maximum, maximum)
        self.stableBlock = nil
    }

    /// Writes the header block of a request for `token`.
    /// - Parameter authorization: the provider token's compact form, for token authentication.
    public mutating func writeBlock(
        for token: DeviceToken, template: HTTP2NotificationTemplate, authorization: String?, into buffer: inout ByteBuffer
    ) {
        if let smallest = self.pendingSizeUpdate {
            self.pendingSizeUpdate = nil
            Self.writeInteger(smallest, prefix: 5, flags: 0x20, into: &buffer)
            if smallest != self.maximumSize { Self.writeInteger(self.maximumSize, prefix: 5, flags: 0x20, into: &buffer) }
        }
        Self.writePath(for: token, into: &buffer)
        if template != self.cachedTemplate || authorization != self.cachedAuthorization {
            self.cachedTemplate = template
            self.cachedAuthorization = authorization
            self.fields = self.makeFields(template, authorization: authorization)
            self.stableBlock = nil
        }
        if let block = self.stableBlock {
            buffer.writeImmutableBuffer(block)
            return
        }
        let start = buffer.writerIndex
        if self.encodeFields(into: &buffer) {
            // A copy: a slice would share the caller's buffer, and every later write to it would
            // copy the whole buffer first.
            self.stableBlock = ByteBuffer(buffer: buffer.getSlice(at: start, length: buffer.writerIndex - start)!)
        }
    }

    /// `:path`: a literal without indexing, named by the static table's `:path`, written raw.
    static func writePath(for token: DeviceToken, into buffer: inout ByteBuffer) {
        token.withUnsafeBytes { raw in
            buffer.writeInteger(UInt8(0x04))
            Self.writeInteger(pathPrefix.count + 2 * raw.count, prefix: 7, flags: 0, into: &buffer)
            buffer.writeBytes(pathPrefix)
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 2 * raw.count) { out in
                for (index, byte) in raw.enumerated() {
                    out[2 * index] = hexDigits[Int(byte >> 4)]
                    out[2 * index + 1] = hexDigits[Int(byte & 0x0F)]
                }
                return 2 * raw.count
            }
        }
    }

    private func makeFields(_ template: HTTP2NotificationTemplate, authorization: String?) -> [Field] {
        var fields = [
            Field(name: Array(":method".utf8), value: Array("POST".utf8), staticIndex: 3, staticNameIndex: 2),
            Field(name: Array(":scheme".utf8), value: Array("https".utf8), staticIndex: 7, staticNameIndex: 6),
            Field(name: Array(":authority".utf8), value: self.authority, staticIndex: 0, staticNameIndex: 1),
        ]
        for (name, value, _) in template.headers {
            fields.append(Field(name: Array(name.utf8), value: Array(value.utf8), staticIndex: 0, staticNameIndex: name == "content-length" ? 28 : 0))
        }
        if let authorization {
            fields.append(Field(name: Array("authorization".utf8), value: Array(("bearer " + authorization).utf8), staticIndex: 0, staticNameIndex: 23))
        }
        return fields
    }

    /// Encodes ``fields``; returns whether the table stayed as it was (the bytes then hold for the
    /// next block too).
    private mutating func encodeFields(into buffer: inout ByteBuffer) -> Bool {
        // Entered in the table only if all of them fit at once; otherwise each request would enter
        // them again and evict the ones entered before.
        let indexing = self.fields.reduce(0) { $0 + ($1.staticIndex == 0 ? $1.size : 0) } <= self.maximumSize
        var unchanged = true
        for field in self.fields {
            if field.staticIndex != 0 {
                Self.writeInteger(field.staticIndex, prefix: 7, flags: 0x80, into: &buffer)
            } else if let index = self.table.index(where: { $0.name == field.name && $0.value == field.value }) {
                Self.writeInteger(index, prefix: 7, flags: 0x80, into: &buffer)
            } else {
                if indexing {
                    Self.writeInteger(field.staticNameIndex, prefix: 6, flags: 0x40, into: &buffer)
                } else {
                    Self.writeInteger(field.staticNameIndex, prefix: 4, flags: 0x00, into: &buffer)
                }
                if field.staticNameIndex == 0 { Self.writeString(field.name, into: &buffer) }
                Self.writeString(field.value, into: &buffer)
                if indexing {
                    self.table.insert(field, size: field.size)
                    unchanged = false
                }
            }
        }
        return unchanged
    }

    /// An integer with a `prefix`-bit prefix after `flags` (RFC 7541 §5.1).
    static func writeInteger(_ value: Int, prefix: Int, flags: UInt8, into buffer: inout ByteBuffer) {
        let limit = 1 << prefix - 1
        guard value >= limit else {
            buffer.writeInteger(flags | UInt8(value))
            return
        }
        buffer.writeInteger(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 0x80 {
            buffer.writeInteger(UInt8(rest & 0x7F | 0x80))
            rest >>= 7
        }
        buffer.writeInteger(UInt8(rest))
    }

    private static func writeString(_ bytes: [UInt8], into buffer: inout ByteBuffer) {
        Self.writeInteger(bytes.count, prefix: 7, flags: 0, into: &buffer)
        buffer.writeBytes(bytes)
    }
}

