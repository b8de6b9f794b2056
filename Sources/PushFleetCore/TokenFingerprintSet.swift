/// A set of token fingerprints in an open-addressing table, eight bytes a slot, at most 70% full:
/// about 115 MB for ten million tokens instead of the tokens themselves. Used to drop duplicate
/// tokens from an audience as it streams by. See ``TokenFingerprint`` for the collision odds.
public struct TokenFingerprintSet: Sendable {
    private var slots: [UInt64]
    private var mask: Int
    public private(set) var count = 0

    public init(capacity: Int = 1 << 16) {
        var size = 1 << 10
        while size < capacity * 10 / 7 { size <<= 1 }
        self.slots = Array(repeating: 0, count: size)
        self.mask = size - 1
    }

    /// Adds `token`; returns `false` if it was there already.
    @discardableResult
    public mutating func insert(_ token: DeviceToken) -> Bool {
        self.insert(fingerprint: token.fingerprint)
    }

    /// Adds a fingerprint (never 0); returns `false` if it was there already.
    @discardableResult
    public mutating func insert(fingerprint: UInt64) -> Bool {
        if (self.count + 1) * 10 > self.slots.count * 7 { self.grow() }
        var slot = Int(truncatingIfNeeded: fingerprint) & self.mask
        while true {
            let present = self.slots[slot]
            if present == fingerprint { return false }
            if present == 0 {
                self.slots[slot] = fingerprint
                self.count += 1
                return true
            }
            slot = (slot + 1) & self.mask
        }
    }

    public func contains(_ token: DeviceToken) -> Bool {
        let fingerprint = token.fingerprint
        var slot = Int(truncatingIfNeeded: fingerprint) & self.mask
        while true {
            let present = self.slots[slot]
            if present == fingerprint { return true }
            if present == 0 { return false }
            slot = (slot + 1) & self.mask
        }
    }

    private mutating func grow() {
        let old = self.slots
        self.slots = Array(repeating: 0, count: old.count * 2)
        self.mask = self.slots.count - 1
        for fingerprint in old where fingerprint != 0 {
            var slot = Int(truncatingIfNeeded: fingerprint) & self.mask
            while self.slots[slot] != 0 { slot = (slot + 1) & self.mask }
            self.slots[slot] = fingerprint
        }
    }
}
