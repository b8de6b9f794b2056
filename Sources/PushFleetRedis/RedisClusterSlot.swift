/// Redis Cluster's key → hash slot function: CRC16 (XMODEM) of the key, modulo 16384.
///
/// When the key holds a `{…}` with at least one byte between the first `{` and the next `}`, only
/// those bytes are hashed (the hash tag), so `pf:{c}:meta` and `pf:{c}:s:7` share one slot.
public enum RedisClusterSlot {
    /// How many slots a Redis Cluster has.
    public static let count = 16_384

    /// The slot of `key`.
    public static func of<Key: Collection<UInt8>>(_ key: Key) -> Int {
        Int(self.crc16(self.hashed(key)) & 0x3FFF)
    }

    /// The part of `key` that is hashed: its hash tag, or the whole key when it has none.
    static func hashed<Key: Collection<UInt8>>(_ key: Key) -> Key.SubSequence {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        let afterOpen = key.index(after: open)
        guard let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen else { return key[...] }
        return key[afterOpen..<close]
    }

    /// CRC-16/XMODEM: polynomial 0x1021, initial value 0, no reflection, as Redis Cluster specifies.
    static func crc16<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ self.table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index -> UInt16 in
        var crc = UInt16(index) << 8
        for _ in 0..<8 {
            crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
        }
        return crc
    }
}
