/// Unsigned LEB128, the length prefix of a recipient's packed values and of each recipient in a
/// stored shard's values: seven bits a byte, low bits first, the high bit set on every byte but
/// the last (one byte below 128).
public enum LEB128 {
    /// Appends `value` (not negative).
    public static func append(_ value: Int, to out: inout [UInt8]) {
        precondition(value >= 0)
        var rest = value
        while rest >= 0x80 {
            out.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }

    /// Reads a value at `index` of `raw` and moves `index` past it; nil when `raw` ends first or
    /// the value takes more than four bytes (2^28 and more: never a length here).
    public static func read(_ raw: UnsafeRawBufferPointer, at index: inout Int) -> Int? {
        var value = 0
        var shift = 0
        while shift < 28, index < raw.count {
            let byte = raw[index]
            index += 1
            value |= Int(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil
    }
}
