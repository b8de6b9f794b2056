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
/// The table is open-addressed by the fingerprint, which is hashed already: a slot holds the
/// fingerprint, the token and the refusal together (48 bytes), so a lookup reads one slot (one or
/// two cache lines) and compares the token itself: two tokens with one fingerprint stay apart. (A
/// `Dictionary` would hash each token again, and keep its keys and values in two arrays.)
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

    /// A slot of the table; `fingerprint` 0 (no token's) marks it empty.
    private struct Slot: Sendable {
        var fingerprint: UInt64
        var token: DeviceToken
        var refusal: Refusal
    }

    private static let largestFilterWords = 1 << 18

    /// A power of two of slots, at most half of them used, so that a probe ends soon.
    private let slots: [Slot]
    private let filter: [UInt64]
    private let count: Int

    /// The table's size: a power of two.
    var slotCount: Int { self.slots.count }

    /// A token in more than one set gets the first of invalid, unregistered, other topic.
    package init(invalid: Set<DeviceToken>, unregistered: Set<DeviceToken>, otherTopic: Set<DeviceToken> = []) {
        self.init(invalid: invalid, unregistered: unregistered, otherTopic: otherTopic, fingerprint: \.fingerprint)
    }

    /// The same with another fingerprint than ``TokenFingerprint``: tests give tokens one
    /// fingerprint to see them told apart.
    init(invalid: Set<DeviceToken>, unregistered: Set<DeviceToken>, otherTopic: Set<DeviceToken>, fingerprint: (DeviceToken) -> UInt64) {
        let most = invalid.count + unregistered.count + otherTopic.count
        var size = 1
        while size < most * 2 { size <<= 1 }
        // The empty slots' token is never read: their fingerprint says they are empty. (One byte
        // is a valid token: this cannot throw.)
        let placeholder = try! DeviceToken(bytes: [0])
        var slots = [Slot](repeating: Slot(fingerprint: 0, token: placeholder, refusal: .invalid), count: size)
        var count = 0
        for (tokens, refusal) in [(invalid, Refusal.invalid), (unregistered, .unregistered), (otherTopic, .otherTopic)] {
            for token in tokens {
                let fingerprint = fingerprint(token)
                var slot = Self.home(fingerprint, size)
                while slots[slot].fingerprint != 0, slots[slot].fingerprint != fingerprint || slots[slot].token != token {
                    slot = (slot + 1) & (size - 1)
                }
                // Already there from an earlier set: it keeps that set's refusal.
                guard slots[slot].fingerprint == 0 else { continue }
                slots[slot] = Slot(fingerprint: fingerprint, token: token, refusal: refusal)
                count += 1
            }
        }
        // About 16 bits a token (one in a hundred valid tokens let through) until the cap.
        var words = 1
        while words < count / 4, words < Self.largestFilterWords { words <<= 1 }
        var filter = [UInt64](repeating: 0, count: words)
        for slot in slots where slot.fingerprint != 0 {
            filter[Self.word(slot.fingerprint, words)] |= Self.bits(slot.fingerprint)
        }
        self.slots = slots
        self.filter = filter
        self.count = count
    }

    package var isEmpty: Bool { self.count == 0 }

    /// Why `token` is refused, if it is; `fingerprint` is its ``TokenFingerprint``.
    /// With none refused the filter is one empty word: nothing passes it.
    package func refusal(of token: DeviceToken, fingerprint: UInt64) -> Refusal? {
        guard self.passes(fingerprint) else { return nil }
        return self.probe(token, fingerprint)
    }

    /// Looks up many tokens at once, as ``refusal(of:fingerprint:)`` would one by one, and reports
    /// each refused one with `found(index, refusal)`, in order. `fingerprints` holds a fingerprint
    /// per entry, 0 where there is no token (no token's fingerprint is 0); `token(index)` is the
    /// token of an entry the table has to compare.
    ///
    /// A lookup in a table this size waits for memory: its filter word is in cache, but its slot
    /// rarely is, nor the slot's page in the TLB. One lookup after another waits for each in turn,
    /// and worse, a branch on a filter word that is still on its way (a token of a stale audience
    /// passes or not, unpredictably) throws away the loads begun after it. So the filter is read
    /// for every entry without a branch, then the first slot of every entry it let through, in a
    /// loop of loads alone, whose waits overlap; the table is then searched in cache.
    package func refusals(fingerprints: UnsafeBufferPointer<UInt64>, token: (Int) -> DeviceToken, found: (Int, Refusal) -> Void) {
        guard !self.isEmpty, !fingerprints.isEmpty else { return }
        withUnsafeTemporaryAllocation(of: (index: Int, first: UInt64).self, capacity: fingerprints.count) { through in
            var passed = 0
            for (index, fingerprint) in fingerprints.enumerated() {
                // Written for every entry, kept (by moving on) for those that pass.
                through[passed] = (index, 0)
                passed &+= (self.passes(fingerprint) ? 1 : 0) & (fingerprint != 0 ? 1 : 0)
            }
            let size = self.slots.count
            for entry in 0..<passed {
                through[entry].first = self.slots[Self.home(fingerprints[through[entry].index], size)].fingerprint
            }
            for (index, first) in through[..<passed] where first != 0 {
                if let refusal = self.probe(token(index), fingerprints[index]) { found(index, refusal) }
            }
        }
    }

    /// The table's answer for a token the filter let through.
    private func probe(_ token: DeviceToken, _ fingerprint: UInt64) -> Refusal? {
        let mask = self.slots.count - 1
        var slot = Self.home(fingerprint, self.slots.count)
        while true {
            let found = self.slots[slot].fingerprint
            if found == 0 { return nil }
            if found == fingerprint, self.slots[slot].token == token { return self.slots[slot].refusal }
            slot = (slot + 1) & mask
        }
    }

    /// Whether the filter lets a token with this fingerprint through to the table: false means
    /// it is not refused.
    func passes(_ fingerprint: UInt64) -> Bool {
        let bits = Self.bits(fingerprint)
        return self.filter[Self.word(fingerprint, self.filter.count)] & bits == bits
    }

    /// A fingerprint's first slot: from bits 18 and up, above those that choose its filter word
    /// (`size` is a power of two, ``slotCount``).
    static func home(_ fingerprint: UInt64, _ size: Int) -> Int {
        Int(truncatingIfNeeded: fingerprint &>> 18) & (size - 1)
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
