/// Recipients' packed values (``PayloadTemplate/pack(_:)``) one after another in one buffer, each
/// after its length in LEB128: how a launch carries them from its audience to a shard, and how
/// Postgres stores a shard's. One buffer for many recipients, not an array each.
public struct RecipientValueList: Sendable, Hashable {
    /// The packing: for each recipient, the length of its values, then the values.
    public private(set) var bytes: [UInt8] = []
    /// How many recipients.
    public private(set) var count = 0

    public init() {}

    /// The list of `values`, one per recipient, in order.
    public init(_ values: [[UInt8]]) {
        for recipient in values { self.append(recipient) }
    }

    /// The list a packing holds, or nil when `bytes` is not one.
    public init?(packed bytes: [UInt8]) {
        var count = 0
        let valid = bytes.withUnsafeBytes { raw -> Bool in
            var index = 0
            while index < raw.count {
                guard let length = LEB128.read(raw, at: &index), length <= raw.count - index else { return false }
                index += length
                count += 1
            }
            return true
        }
        guard valid else { return nil }
        self.bytes = bytes
        self.count = count
    }

    public var isEmpty: Bool { self.count == 0 }

    /// Appends a recipient's values.
    public mutating func append(_ values: some Collection<UInt8>) {
        self.append(ArraySlice(values))
    }

    /// Appends a recipient's values taken from another list (``bytes``, at ``values(at:)``): a
    /// concrete overload, so that a caller in another module does not go through the generic one.
    public mutating func append(_ values: ArraySlice<UInt8>) {
        LEB128.append(values.count, to: &self.bytes)
        self.bytes.append(contentsOf: values)
        self.count += 1
    }

    /// Appends `count` recipients of `other` at once: those whose packing lies in `range` of its
    /// ``bytes`` (from the start of one recipient to the start of another, or the end).
    public mutating func append(_ count: Int, from other: RecipientValueList, bytes range: Range<Int>) {
        assert(RecipientValueList(packed: Array(other.bytes[range]))?.count == count, "\(range) is not \(count) recipients of the list")
        self.bytes.append(contentsOf: other.bytes[range])
        self.count += count
    }

    /// Appends a recipient's values as `template` packs them from `value(i)`, its value of field
    /// `i`; returns the size of the payload they render to.
    public mutating func append(_ template: PayloadTemplate, _ value: (Int) throws -> String?) rethrows -> Int {
        let size = try template.pack(into: &self.bytes, value)
        self.count += 1
        return size
    }

    /// ``append(_:_:)`` from each field's value as UTF-8, `utf8(i)` (nil or empty: none), valid
    /// UTF-8 that stays readable for the call.
    public mutating func append(_ template: PayloadTemplate, utf8 value: (Int) -> UnsafeBufferPointer<UInt8>?) -> Int {
        let size = template.pack(into: &self.bytes, utf8: value)
        self.count += 1
        return size
    }

    public mutating func removeAll(keepingCapacity: Bool = true) {
        self.bytes.removeAll(keepingCapacity: keepingCapacity)
        self.count = 0
    }

    /// Where the values of the recipient at `offset` of ``bytes`` lie, and the offset of the next;
    /// start at 0.
    /// - Precondition: `offset` is the start of a recipient (the list is well formed).
    public func values(at offset: Int) -> (values: Range<Int>, next: Int) {
        self.bytes.withUnsafeBytes { raw in
            var index = offset
            let length = LEB128.read(raw, at: &index)!
            return (index..<(index + length), index + length)
        }
    }

    /// Each recipient's values, as arrays (for tests and small lists).
    public var arrays: [[UInt8]] {
        var arrays: [[UInt8]] = []
        var offset = 0
        while offset < self.bytes.count {
            let (values, next) = self.values(at: offset)
            arrays.append(Array(self.bytes[values]))
            offset = next
        }
        return arrays
    }
}
