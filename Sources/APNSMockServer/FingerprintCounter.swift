/// An open-addressing hash table from token fingerprints to delivery counts (saturating at 255).
/// Not thread-safe; ``DeliveryLedger`` guards it. Nine bytes per slot, kept at most 70% full.
struct FingerprintCounter {
    private var keys: [UInt64]
    private var counts: [UInt8]
    private var mask: Int
    /// Distinct fingerprints stored.
    private(set) var distinct = 0
    /// Distinct fingerprints whose count is above one.
    private(set) var duplicated = 0

    init(capacity: Int = 1 << 16) {
        var size = 1 << 10
        while size < capacity { size <<= 1 }
        self.keys = Array(repeating: 0, count: size)
        self.counts = Array(repeating: 0, count: size)
        self.mask = size - 1
    }

    /// Adds one delivery of `key` (non-zero).
    mutating func increment(_ key: UInt64) {
        if (self.distinct + 1) * 10 > self.keys.count * 7 { self.grow() }
        var slot = Int(truncatingIfNeeded: key) & self.mask
        while true {
            let present = self.keys[slot]
            if present == key {
                if self.counts[slot] == 1 { self.duplicated += 1 }
                if self.counts[slot] < UInt8.max { self.counts[slot] += 1 }
                return
            }
            if present == 0 {
                self.keys[slot] = key
                self.counts[slot] = 1
                self.distinct += 1
                return
            }
            slot = (slot + 1) & self.mask
        }
    }

    /// The deliveries recorded for `key`, 0 if none.
    func count(_ key: UInt64) -> Int {
        var slot = Int(truncatingIfNeeded: key) & self.mask
        while true {
            let present = self.keys[slot]
            if present == key { return Int(self.counts[slot]) }
            if present == 0 { return 0 }
            slot = (slot + 1) & self.mask
        }
    }

    /// The approximate memory held, in bytes.
    var memoryBytes: Int { self.keys.count * 9 }

    private mutating func grow() {
        let oldKeys = self.keys
        let oldCounts = self.counts
        let size = oldKeys.count * 2
        self.keys = Array(repeating: 0, count: size)
        self.counts = Array(repeating: 0, count: size)
        self.mask = size - 1
        for index in oldKeys.indices where oldKeys[index] != 0 {
            var slot = Int(truncatingIfNeeded: oldKeys[index]) & self.mask
            while self.keys[slot] != 0 { slot = (slot + 1) & self.mask }
            self.keys[slot] = oldKeys[index]
            self.counts[slot] = oldCounts[index]
        }
    }
}
