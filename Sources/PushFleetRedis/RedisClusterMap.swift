/// Which master serves each slot of a Redis Cluster, as `CLUSTER SLOTS` reported it.
struct RedisClusterMap: Sendable {
    /// A node's address as the cluster names it.
    struct Address: Hashable, Sendable, CustomStringConvertible {
        var host: String
        var port: Int

        var description: String { self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)" }
    }

    /// The masters, each once.
    private(set) var masters: [Address] = []
    /// Per slot, its master's index in ``masters``, or ``unassigned``.
    private var slots = [UInt16](repeating: Self.unassigned, count: RedisClusterSlot.count)
    private static let unassigned = UInt16.max

    /// The master serving `slot`, or nil when no node serves it.
    func master(of slot: Int) -> Address? {
        let index = self.slots[slot]
        return index == Self.unassigned ? nil : self.masters[Int(index)]
    }

    /// How many slots have a master.
    var assignedSlots: Int { self.slots.count { $0 != Self.unassigned } }

    /// A map in which no slot has a master yet.
    init() {}

    /// Records that `address` serves `slot` (after a `MOVED`).
    mutating func assign(_ slot: Int, to address: Address) {
        if let index = self.masters.firstIndex(of: address) {
            self.slots[slot] = UInt16(index)
        } else {
            self.masters.append(address)
            self.slots[slot] = UInt16(self.masters.count - 1)
        }
    }

    /// Parses a `CLUSTER SLOTS` reply: `[start, end, [host, port, id, metadata], replica…]` per range.
    ///
    /// The host is the node's preferred endpoint. Redis 7 sends NULL or an empty string when it is
    /// unknown (the node asked is meant), and `?` when the node has no hostname configured, in which
    /// case the metadata's `ip` is used when present.
    /// - Parameter askedHost: The host the reply came from.
    /// - Returns: nil when the reply does not have that shape.
    init?(slotsReply reply: RedisReply, askedHost: String) {
        guard let ranges = reply.array else { return nil }
        for range in ranges {
            guard let fields = range.array, fields.count >= 3,
                let start = fields[0].integer, let end = fields[1].integer,
                0 <= start, start <= end, end < RedisClusterSlot.count,
                let master = fields[2].array, master.count >= 2,
                master[0].isNull || master[0].string != nil,
                let port = master[1].integer, (1...65_535).contains(port)
            else { return nil }
            let address = Address(host: Self.host(master, askedHost: askedHost), port: port)
            for slot in start...end { self.assign(slot, to: address) }
        }
    }

    /// The host of a `CLUSTER SLOTS` node entry; see ``init(slotsReply:askedHost:)``.
    private static func host(_ node: [RedisReply], askedHost: String) -> String {
        let host = node[0].string ?? ""
        if host == "?", node.count >= 4, let metadata = node[3].array {
            // Pairs of name and value: `ip`, `hostname`.
            for index in stride(from: 0, to: metadata.count - 1, by: 2) where metadata[index].string == "ip" {
                if let ip = metadata[index + 1].string, !ip.isEmpty { return ip }
            }
        }
        return host.isEmpty || host == "?" ? askedHost : host
    }
}

/// A cluster node's answer that the command belongs elsewhere: `MOVED <slot> <host>:<port>` (the
/// slot lives there now) or `ASK <slot> <host>:<port>` (this one command, after `ASKING`, while the
/// slot migrates).
struct RedisRedirect: Hashable, Sendable {
    enum Kind: Hashable, Sendable { case moved, ask }

    var kind: Kind
    var slot: Int
    var address: RedisClusterMap.Address

    /// The redirect in `reply`, or nil when it is not one. An empty host means `askedHost`.
    init?(_ reply: RedisReply, askedHost: String) {
        guard case .error(let message) = reply else { return nil }
        let words = message.split(separator: " ")
        guard words.count == 3, let slot = Int(words[1]), (0..<RedisClusterSlot.count).contains(slot) else { return nil }
        switch words[0] {
        case "MOVED": self.kind = .moved
        case "ASK": self.kind = .ask
        default: return nil
        }
        // The port follows the last colon: an IPv6 host has colons of its own.
        let endpoint = words[2]
        guard let colon = endpoint.lastIndex(of: ":"), let port = Int(endpoint[endpoint.index(after: colon)...]),
            (1...65_535).contains(port)
        else { return nil }
        var host = String(endpoint[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        self.slot = slot
        self.address = .init(host: host.isEmpty ? askedHost : host, port: port)
    }
}
