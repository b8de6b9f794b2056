/// Random `apns-id` values for requests that did not bring a valid one. Each gateway connection has
/// its own generator: SplitMix64 seeded from the system generator. An `apns-id` only has to be
/// unique, not secret, and a system random call per answer was 5% of the simulator's CPU.
struct APNSIdentifier {
    private static let digits = Array("0123456789abcdef".utf8)
    private var state: UInt64

    init() {
        var system = SystemRandomNumberGenerator()
        self.state = system.next()
    }

    /// A random (version 4) UUID in canonical lowercase form.
    mutating func next() -> String {
        var high = self.nextWord()
        var low = self.nextWord()
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

    /// SplitMix64 (Steele, Lea, Flood 2014).
    private mutating func nextWord() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
