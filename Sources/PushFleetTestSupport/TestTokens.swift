public import PushFleetCore

/// Deterministic, random-looking device tokens for tests and the demo: token `i` of seed `s` is the
/// same in every run, and distinct tokens never collide.
public enum TestTokens {
    /// Token number `index` (32 bytes) for `seed`.
    public static func token(_ index: Int, seed: UInt64 = 0) -> DeviceToken {
        var state = UInt64(truncatingIfNeeded: index) &* 0x9E37_79B9_7F4A_7C15 ^ seed
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32)
        // The first eight bytes are the index itself, so tokens are distinct by construction.
        withUnsafeBytes(of: UInt64(truncatingIfNeeded: index).bigEndian ^ seed) { bytes.append(contentsOf: $0) }
        for _ in 0..<3 {
            state = splitMix(&state)
            withUnsafeBytes(of: state) { bytes.append(contentsOf: $0) }
        }
        return try! DeviceToken(bytes: bytes)
    }

    /// Tokens `0..<count` for `seed`.
    public static func tokens(_ count: Int, seed: UInt64 = 0) -> [DeviceToken] {
        (0..<count).map { self.token($0, seed: seed) }
    }

    private static func splitMix(_ state: inout UInt64) -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
