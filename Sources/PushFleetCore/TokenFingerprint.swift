/// A 64-bit fingerprint of a device token's bytes, never zero.
///
/// The simulator's ledger and launch's de-duplication keep fingerprints instead of tokens, so that
/// ten million tokens fit in about 150 MB. Two distinct tokens share a fingerprint with probability
/// about n²/2⁶⁵: 3 in a million for a campaign of ten million tokens.
public enum TokenFingerprint {
    /// The fingerprint of raw token bytes.
    public static func of(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        // FNV-1a over the bytes, then a SplitMix64 finaliser so that every bit depends on every byte.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        hash = Self.mix(hash)
        return hash == 0 ? 1 : hash
    }

    /// SplitMix64's finaliser: every bit of the result depends on every bit of `value`.
    public static func mix(_ value: UInt64) -> UInt64 {
        var hash = value
        hash = (hash ^ (hash >> 30)) &* 0xbf58_476d_1ce4_e5b9
        hash = (hash ^ (hash >> 27)) &* 0x94d0_49bb_1331_11eb
        return hash ^ (hash >> 31)
    }
}

extension DeviceToken {
    /// The token's ``TokenFingerprint``.
    public var fingerprint: UInt64 { self.withUnsafeBytes(TokenFingerprint.of) }
}
