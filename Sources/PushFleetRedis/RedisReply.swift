/// One reply from Redis (RESP2), copied out of hiredis into Swift values.
///
/// Bulk strings are bytes, not text: tokens are stored raw and may contain NUL bytes.
public enum RedisReply: Hashable, Sendable {
    /// A nil bulk string or nil array (`$-1`, `*-1`): a missing key, a Lua `false`.
    case null
    /// An integer reply (`:1`).
    case integer(Int)
    /// A bulk string (`$3 abc`), binary-safe.
    case bulk([UInt8])
    /// A simple status reply (`+OK`).
    case status(String)
    /// An error reply (`-ERR …`). The connection stays usable.
    case error(String)
    /// An array reply (`*2 …`).
    case array([RedisReply])
}

extension RedisReply {
    /// The integer of an `.integer` reply, or of a `.bulk` reply holding a decimal number (as `HGET` returns).
    public var integer: Int? {
        switch self {
        case .integer(let value): value
        case .bulk(let bytes): Int(String(decoding: bytes, as: UTF8.self))
        default: nil
        }
    }

    /// The bytes of a `.bulk` reply.
    public var bytes: [UInt8]? {
        if case .bulk(let bytes) = self { bytes } else { nil }
    }

    /// The text of a `.bulk` (decoded as UTF-8) or `.status` reply.
    public var string: String? {
        switch self {
        case .bulk(let bytes): String(decoding: bytes, as: UTF8.self)
        case .status(let text): text
        default: nil
        }
    }

    /// The elements of an `.array` reply.
    public var array: [RedisReply]? {
        if case .array(let elements) = self { elements } else { nil }
    }

    /// Whether this is the nil reply.
    public var isNull: Bool { self == .null }
}

extension RedisReply: CustomStringConvertible {
    /// A short rendering for messages: bulk strings shown as text when printable, else as a byte count.
    public var description: String {
        switch self {
        case .null: return "(nil)"
        case .integer(let value): return "(integer) \(value)"
        case .status(let text): return text
        case .error(let text): return "(error) \(text)"
        case .bulk(let bytes):
            let printable = bytes.count <= 64 && bytes.allSatisfy { (0x20...0x7E).contains($0) }
            return printable ? "\"\(String(decoding: bytes, as: UTF8.self))\"" : "(\(bytes.count) bytes)"
        case .array(let elements):
            let shown = elements.prefix(8).map(\.description).joined(separator: ", ")
            return "[\(shown)\(elements.count > 8 ? ", … \(elements.count) in all" : "")]"
        }
    }
}
