import DequeModule

extension Deque {
    /// Removes the elements at or after `start` for which `predicate` holds and returns them in
    /// order; the others keep their order.
    mutating func extract(from start: Int = 0, where predicate: (Element) -> Bool) -> [Element] {
        var extracted: [Element] = []
        var kept = Deque()
        kept.reserveCapacity(self.count)
        for (index, element) in self.enumerated() {
            if index >= start && predicate(element) {
                extracted.append(element)
            } else {
                kept.append(element)
            }
        }
        if !extracted.isEmpty { self = kept }
        return extracted
    }
}
