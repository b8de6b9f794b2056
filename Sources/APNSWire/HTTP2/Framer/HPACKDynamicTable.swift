/// The entries of an HPACK dynamic table (RFC 7541 §2.3.2, §4) and their sizes, as one end keeps
/// it: entering one evicts the oldest until it fits, an entry larger than the maximum empties the
/// table, and lowering the maximum evicts too. What an entry holds is the owner's choice.
struct HPACKDynamicTable<Entry: Sendable>: Sendable {
    /// Oldest first from `first`; the places before it were evicted and are dropped in bulk.
    private var entries: [(entry: Entry, size: Int)] = []
    private var first = 0
    /// The table's size: each entry's name and value lengths plus 32.
    private(set) var size = 0
    var maximumSize: Int {
        didSet { self.evict(toFit: 0) }
    }

    init(maximumSize: Int) {
        self.maximumSize = maximumSize
    }

    var count: Int { self.entries.count - self.first }

    /// The entry at HPACK index `index` (62 is the newest), or nil past the last.
    subscript(index index: Int) -> Entry? {
        let offset = index - 62
        guard offset >= 0, offset < self.count else { return nil }
        return self.entries[self.entries.count - 1 - offset].entry
    }

    /// The HPACK index of the newest entry for which `predicate` holds.
    func index(where predicate: (Entry) -> Bool) -> Int? {
        var index = 62
        for position in stride(from: self.entries.count - 1, through: self.first, by: -1) {
            if predicate(self.entries[position].entry) { return index }
            index += 1
        }
        return nil
    }

    /// A dynamic table size update (RFC 7541 §6.3): allowed only before a block's first field, and
    /// up to `allowed` (the size this side announced).
    mutating func update(maximumSize size: Int, allowed: Int, afterField: Bool) throws(HTTP2ConnectionError) {
        guard !afterField else { throw HPACKHeaderDecoder.error("a dynamic table size update after a header field") }
        guard size <= allowed else {
            throw HPACKHeaderDecoder.error("a dynamic table size update to \(size) bytes, above the \(allowed) allowed")
        }
        self.maximumSize = size
    }

    mutating func insert(_ entry: Entry, size: Int) {
        self.evict(toFit: size)
        guard size <= self.maximumSize else { return }
        self.entries.append((entry, size))
        self.size += size
    }

    /// Drops the oldest entries until `room` bytes more fit under the maximum (all, if they cannot).
    private mutating func evict(toFit room: Int) {
        while self.size + room > self.maximumSize, self.first < self.entries.count {
            self.size -= self.entries[self.first].size
            self.first += 1
        }
        if self.first > 32, self.first * 2 > self.entries.count {
            self.entries.removeFirst(self.first)
            self.first = 0
        }
    }
}
