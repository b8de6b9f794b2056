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
        Self.parsePlain(hexDigits: text).map(Result.success) ?? Self.parseSlowly(hexUTF8: text)
    }

    /// Parses an even number of hexadecimal digits, upper or lower case, and nothing else (no
    /// spaces, no `<` `>`): a token as APNs' HTTP/2 path carries it. Nil for anything else.
    public init?(hexDigitsUTF8 text: UnsafeRawBufferPointer) {
        if let token = Self.parsePlain(hexDigits: text) {
            self = token
            return
        }
        // Longer than 32 bytes (rare): every byte a digit, then the general parser.
        guard text.count > 64, Self.hexDigitValues.withUnsafeBufferPointer({ values in text.allSatisfy { values[Int($0)] != 0xFF } }),
            case .success(let token) = Self.parseSlowly(hexUTF8: text)
        else { return nil }
        self = token
    }

    /// A token of up to 32 bytes in plain digits, or nil.
    private static func parsePlain(hexDigits text: UnsafeRawBufferPointer) -> DeviceToken? {
        // The most common case, a 32-byte token in 64 plain digits: eight digits at a time.
        if text.count == 64 {
            func bytes(at offset: Int) -> UInt64? {
                guard let first = Self.hexBytes(UInt64(littleEndian: text.loadUnaligned(fromByteOffset: offset, as: UInt64.self))),
                    let second = Self.hexBytes(UInt64(littleEndian: text.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
                else { return nil }
                // The token's bytes in memory order, whatever the machine's.
                return (UInt64(first) | UInt64(second) << 32).littleEndian
            }
            if let a = bytes(at: 0), let b = bytes(at: 16), let c = bytes(at: 32), let d = bytes(at: 48) {
                return DeviceToken(storage: .inline(a, b, c, d, count: 32))
            }
        }
        // Other plain digits of a token of up to 32 bytes: each digit's value looked up,
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
            if plain { return DeviceToken(storage: .inline(words.0, words.1, words.2, words.3, count: UInt8(text.count / 2))) }
        }
        return nil
    }

    /// The four bytes that eight hexadecimal digits spell (the first digit in `digits`' lowest
    /// byte, the first byte in the result's lowest), or nil unless all eight are digits: each
    /// step done on the eight at once, in one 64-bit word.
    @inline(__always)
    static func hexBytes(_ digits: UInt64) -> UInt32? {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        // ASCII only: then adding less than 0x80 to a byte never carries into the next, and a
        // byte's top bit after adding 0x80 - lo says byte >= lo, after adding 0x7F - hi byte > hi.
        guard digits & high == 0 else { return nil }
        func within(_ word: UInt64, _ lo: UInt8, _ hi: UInt8) -> UInt64 {
            (word &+ ones &* UInt64(0x80 - lo)) & ~(word &+ ones &* UInt64(0x7F - hi)) & high
        }
        let isDigit = within(digits, UInt8(ascii: "0"), UInt8(ascii: "9"))
        // Setting 0x20 makes upper-case letters lower-case and leaves digits as they are.
        let isLetter = within(digits | 0x2020_2020_2020_2020, UInt8(ascii: "a"), UInt8(ascii: "f"))
        guard isDigit | isLetter == high else { return nil }
        // A digit's low four bits are its value; a letter's are 1 to 6 and its bit 6 is set: + 9.
        let nibbles = (digits & 0x0F0F_0F0F_0F0F_0F0F) &+ (digits >> 6 & ones) &* 9
        // Each 16-bit lane's low byte: its first digit's value above its second's.
        let lanes = (nibbles << 4 | nibbles >> 8) & 0x00FF_00FF_00FF_00FF
        let pairs = (lanes | lanes >> 8) & 0x0000_FFFF_0000_FFFF
        return UInt32(truncatingIfNeeded: pairs | pairs >> 16)
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

    /// Whether this token comes before `other` in byte order: bytes compared in turn, a prefix
    /// before the longer token (Postgres' `bytea` order). Tokens held inline are compared a word
    /// at a time, which a sort of hundreds of thousands of tokens notices.
    public func precedesInByteOrder(_ other: DeviceToken) -> Bool {
        guard case .inline(let a0, let a1, let a2, let a3, let aCount) = self.storage,
              case .inline(let b0, let b1, let b2, let b3, let bCount) = other.storage
        else {
            return self.withUnsafeBytes { a in other.withUnsafeBytes { b in a.lexicographicallyPrecedes(b) } }
        }
        // The words hold the bytes in memory order (big-endian values compare as the bytes do),
        // and bytes past a token's count are zero: when every word is equal, the shorter token
        // is a prefix of the other, or they are equal.
        if a0 != b0 { return a0.bigEndian < b0.bigEndian }
        if a1 != b1 { return a1.bigEndian < b1.bigEndian }
        if a2 != b2 { return a2.bigEndian < b2.bigEndian }
        if a3 != b3 { return a3.bigEndian < b3.bigEndian }
        return aCount < bCount
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

    /// Copies the token's bytes to `destination`, which has room for ``count`` of them, and
    /// returns how many: what a hot path writing many tokens calls (no closure, nothing generic).
    public func copyBytes(to destination: UnsafeMutableRawPointer) -> Int {
        switch self.storage {
        case .inline(let a, let b, let c, let d, let count):
            if count == 32 {
                destination.storeBytes(of: a, as: UInt64.self)
                destination.storeBytes(of: b, toByteOffset: 8, as: UInt64.self)
                destination.storeBytes(of: c, toByteOffset: 16, as: UInt64.self)
                destination.storeBytes(of: d, toByteOffset: 24, as: UInt64.self)
            } else {
                Swift.withUnsafeBytes(of: (a, b, c, d)) { destination.copyMemory(from: $0.baseAddress!, byteCount: Int(count)) }
            }
            return Int(count)
        case .heap(let bytes):
            bytes.withUnsafeBytes { destination.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            return bytes.count
        }
    }

    /// Appends the token's bytes to `array`; see ``copyBytes(to:)``.
    public func appendBytes(to array: inout [UInt8]) {
        switch self.storage {
        case .inline(let a, let b, let c, let d, let count):
            Swift.withUnsafeBytes(of: (a, b, c, d)) { array.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[..<Int(count)])) }
        case .heap(let bytes):
            array.append(contentsOf: bytes)
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
