/// Random `apns-id` values for requests that did not bring a valid one.
enum APNSIdentifier {
    private static let digits = Array("0123456789abcdef".utf8)

    /// A random (version 4) UUID in canonical lowercase form.
    static func random() -> String {
        var generator = SystemRandomNumberGenerator()
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & ~0xF000) | 0x4000  // version 4
        low = (low & ~(0xC << 60)) | (0x8 << 60)  // RFC 4122 variant
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var index = 0
            for nibble in 0..<32 {
                if nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20 {
                    buffer[index] = UInt8(ascii: "-")
                    index += 1
                }
                let word = nibble < 16 ? high : low
                buffer[index] = Self.digits[Int((word >> UInt64(60 - (nibble % 16) * 4)) & 0xF)]
                index += 1
            }
            return index
        }
    }
}
