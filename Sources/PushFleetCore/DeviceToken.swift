/// An APNs device token: the raw bytes a device registered with.
///
/// Apple asks providers not to assume a size, so any length from 1 to ``maximumByteCount`` bytes is
/// accepted here; the binary provider protocol, which requires exactly 32 bytes, checks that itself.
/// Tokens of up to 32 bytes (every token Apple issues today) are stored inline without allocating.
public struct DeviceToken: Hashable, Sendable {
    /// The largest token accepted, in bytes. A token item's length field is 16 bits, but no real
    /// token comes near this; anything longer is a mistake in the input.
    public static let maximumByteCount = 255

    /// The size of every token Apple issues today, and the only size the binary protocol accepts.
    public static let binaryProtocolByteCount = 32

    private enum Storage: Hashable, Sendable {
        case inline(UInt64, UInt64, UInt64, UInt64, count: UInt8)
        case heap([UInt8])
    }
    private let storage: Storage

    /// Creates a token from its raw bytes.
    /// - Throws: ``DeviceTokenError`` if `bytes` is empty or longer than ``maximumByteCount``.
    @inlinable
    public init(bytes: some Collection<UInt8>) throws(DeviceTokenError) {
        // Specialised in the caller, then one non-generic copy from contiguous memory.
        let made = bytes.withContiguousStorageIfAvailable { Self.make(copying: UnsafeRawBufferPointer($0)) }
        self = try (made ?? Array(bytes).withUnsafeBytes { Self.make(copying: $0) }).get()
    }

    /// Parses a token written in hexadecimal, upper or lower case, with optional spaces between digits
    /// (`c9d4c07c fbbc26d6 …`, as Xcode logs print it) and optional surrounding `<` `>`.
    /// - Throws: ``DeviceTokenError`` naming the offending character and its column.
    public init(hex: some StringProtocol) throws(DeviceTokenError) {
        try self.init(hexUTF8: hex.utf8)
    }

    /// Parses hexadecimal text given as UTF-8 bytes; see ``init(hex:)``. Used on the hot path of
    /// token files, where lines arrive as bytes.
    @inlinable
    public init(hexUTF8 text: some Collection<UInt8>) throws(DeviceTokenError) {
        let parsed = text.withContiguousStorageIfAvailable { Self.parse(hexUTF8: UnsafeRawBufferPointer($0)) }
        self = try (parsed ?? Array(text).withUnsafeBytes { Self.parse(hexUTF8: $0) }).get()
    }

    @usableFromInline
    static func make(copying raw: UnsafeRawBufferPointer) -> Result<DeviceToken, DeviceTokenError> {
        guard !raw.isEmpty else { return .failure(.empty()) }
        guard raw.count <= Self.maximumByteCount else { return .failure(.tooLong(byteCount: raw.count)) }
        if raw.count <= 32 {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: raw) }
            return .success(DeviceToken(storage: .inline(words.0, words.1, words.2, words.3, count: UInt8(raw.count))))
        }
        return .success(DeviceToken(storage: .heap(Array(raw))))
    }

    @usableFromInline
    static func parse(hexUTF8 text: UnsafeRawBufferPointer) -> Result<DeviceToken, DeviceTokenError> {
        // The common case, plain digits of a token of up to 32 bytes: each digit's value looked up,
        // no branch per digit (digits and letters of random tokens interleave unpredictably).
        if text.count <= 64, text.count > 0, text.count % 2 == 0 {
            var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            let plain = Self.hexDigitValues.withUnsafeBufferPointer { values in
                withUnsafeMutableBytes(of: &words) { out -> Bool in
                    var invalid: UInt8 = 0
                    var index = 0
                    while index < text.count {
                        let high = values[Int(text[index])]
                        let low = values[Int(text[index + 1])]
                        invalid |= high | low
                        out[index / 2] = high << 4 | low & 0x0F
                        index += 2
                    }
                    return invalid & 0xF0 == 0
                }
            }
            if plain { return .success(DeviceToken(storage: .inline(words.0, words.1, words.2, words.3, count: UInt8(text.count / 2)))) }
        }
        return Self.parseSlowly(hexUTF8: text)
    }

    /// Each byte's value as a hexadecimal digit, or 0xFF for a byte that is not one.
    private static let hexDigitValues: [UInt8] = (0...255).map { byte -> UInt8 in
        switch UInt8(byte) {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt8(byte) - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt8(byte) - UInt8(ascii: "A") + 10
        default: 0xFF
        }
    }

    /// Spaces, angle brackets, and errors with their column.
    private static func parseSlowly(hexUTF8 text: UnsafeRawBufferPointer) -> Result<DeviceToken, DeviceTokenError> {
        // Two digits per byte at most; one spare byte lets an over-long token be reported as such.
        withUnsafeTemporaryAllocation(byteCount: Self.maximumByteCount + 1, alignment: 1) { out in
            var count = 0
            var high: UInt8? = nil
            var digits = 0
            var column = 0
            for character in text {
                column += 1
                let nibble: UInt8
                switch character {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = character &- UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = character &- UInt8(ascii: "a") &+ 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): nibble = character &- UInt8(ascii: "A") &+ 10
                case UInt8(ascii: " "), UInt8(ascii: "\t"): continue
                case UInt8(ascii: "<") where digits == 0: continue
                case UInt8(ascii: ">") where column == text.count: continue
                default: return .failure(.invalidCharacter(character, column: column))
                }
                digits += 1
                if let h = high {
                    if count < out.count { out[count] = h << 4 | nibble }
                    count += 1
                    high = nil
                } else {
                    high = nibble
                }
            }
            guard digits > 0 else { return .failure(.empty()) }
            guard high == nil else { return .failure(.oddDigitCount(digits)) }
            guard count <= Self.maximumByteCount else { return .failure(.tooLong(byteCount: count)) }
            return Self.make(copying: UnsafeRawBufferPointer(rebasing: out[0..<count]))
        }
    }

    private init(storage: Storage) {
        self.storage = storage
    }

    /// The number of bytes in the token.
    public var count: Int {
        switch self.storage {
        case .inline(_, _, _, _, let count): return Int(count)
        case .heap(let bytes): return bytes.count
        }
    }

    /// Calls `body` with the token's raw bytes; the pointer is valid only during the call.
    @inlinable
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        try self._withUnsafeBytes(body)
    }

    @usableFromInline
    func _withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        switch self.storage {
        case .inline(let a, let b, let c, let d, let count):
            let words = (a, b, c, d)
            return try Swift.withUnsafeBytes(of: words) { try body(UnsafeRawBufferPointer(rebasing: $0[0..<Int(count)])) }
        case .heap(let bytes):
            return try bytes.withUnsafeBytes(body)
        }
    }

    /// The token's bytes as an array.
    public var bytes: [UInt8] { self.withUnsafeBytes { Array($0) } }

    /// The token in lowercase hexadecimal without spaces, as APNs expects it in `:path`.
    public var hexString: String {
        self.withUnsafeBytes { raw in
            String(unsafeUninitializedCapacity: raw.count * 2) { buffer in
                var index = 0
                for byte in raw {
                    buffer[index] = hexDigits[Int(byte >> 4)]
                    buffer[index + 1] = hexDigits[Int(byte & 0x0F)]
                    index += 2
                }
                return index
            }
        }
    }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

extension DeviceToken: CustomStringConvertible {
    public var description: String { self.hexString }
}
