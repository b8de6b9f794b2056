package import PushFleetCore

/// The device tokens the simulator was told to refuse, and why, behind a filter of their
/// fingerprints.
///
/// Every notification's token is checked, and the tokens come in no order, so a lookup in a table
/// of a million tokens misses the CPU's caches. The filter is a blocked Bloom filter: a token sets
/// two bits of one 64-bit word, chosen by its fingerprint (the one the ledger records anyway), and
/// the filter is at most 2 MiB, so it stays in cache. A token it rules out (every token of a clean
/// audience, most of a stale one's valid tokens) costs one word read; one it lets through is looked
/// up in the table, which decides.
///
/// Built once per simulator and shared by its connections (copied on write, and never written).
package struct RefusedTokens: Sendable {
    package enum Refusal: Equatable, Sendable {
        /// HTTP/2 400 `BadDeviceToken`, binary status 8 `InvalidToken`.
        case invalid
        /// HTTP/2 410 `Unregistered`; on binary, accepted and then listed by the feedback service.
        case unregistered
        /// HTTP/2 400 `DeviceTokenNotForTopic`.
        case otherTopic
    }

    private static let largestFilterWords = 1 << 18

    private let refusals: [DeviceToken: Refusal]
    private let filter: [UInt64]

    /// A token in more than one set gets the first of invalid, unregistered, other topic.
    package init(invalid: Set<DeviceToken>, unregistered: Set<DeviceToken>, otherTopic: Set<DeviceToken> = []) {
        var refusals: [DeviceToken: Refusal] = [:]
        refusals.reserveCapacity(invalid.count + unregistered.count + otherTopic.count)
        for (tokens, refusal) in [(otherTopic, Refusal.otherTopic), (unregistered, .unregistered), (invalid, .invalid)] {
            for token in tokens { refusals[token] = refusal }
        }
        // About 16 bits a token (one in a hundred valid tokens let through) until the cap.
        var words = 1
        while words < refusals.count / 4, words < Self.largestFilterWords { words <<= 1 }
        var filter = [UInt64](repeating: 0, count: words)
        for token in refusals.keys {
            let fingerprint = token.fingerprint
            filter[Self.word(fingerprint, words)] |= Self.bits(fingerprint)
        }
        self.refusals = refusals
        self.filter = filter
    }

    package var isEmpty: Bool { self.refusals.isEmpty }

    /// Why `token` is refused, if it is; `fingerprint` is its ``TokenFingerprint``.
    /// With none refused the filter is one empty word: nothing passes it.
    package func refusal(of token: DeviceToken, fingerprint: UInt64) -> Refusal? {
        guard self.passes(fingerprint) else { return nil }
        return self.refusals[token]
    }

    /// Whether the filter lets a token with this fingerprint through to the table: false means
    /// it is not refused.
    func passes(_ fingerprint: UInt64) -> Bool {
        let bits = Self.bits(fingerprint)
        return self.filter[Self.word(fingerprint, self.filter.count)] & bits == bits
    }

    /// The word of a fingerprint: its low bits (`words` is a power of two).
    private static func word(_ fingerprint: UInt64, _ words: Int) -> Int {
        Int(truncatingIfNeeded: fingerprint) & (words - 1)
    }

    /// The two bits of a fingerprint in its word: from its top twelve bits, which the word index
    /// (at most eighteen low bits) does not use.
    private static func bits(_ fingerprint: UInt64) -> UInt64 {
        (1 &<< (fingerprint &>> 52 & 63)) | (1 &<< (fingerprint &>> 58))
    }
}
