/// Where one command must run on a Redis Cluster: on the node serving a slot, or on any node.
///
/// The key is found by the command's shape, not by asking the server: the first argument for the
/// data commands, the first of `numkeys` keys for scripts, the first stream after `STREAMS`, the
/// key (or first of `KEYS`) of `MIGRATE`, and
/// the hash tag of `SCAN`'s `MATCH` pattern (a campaign's keys share one slot, so scanning its node
/// finds them all). Should a guess for a keyed command be wrong, the node answers `MOVED` and the
/// command is sent again where it belongs; a `SCAN` sent to the wrong node would find nothing, so
/// it is sent only by a map read again after any change this connection saw. A command that needs keys from several
/// slots fails with Redis' `CROSSSLOT`.
enum RedisRoute: Hashable, Sendable {
    /// The node serving this slot.
    case slot(Int)
    /// Any node: the command names no key (`PING`, `SCRIPT`, `INFO`, `TIME`...).
    case anyNode

    /// The route of `arguments` (command name first), or nil when a cluster cannot run it as one
    /// command: `MULTI`/`EXEC`/`WATCH`, and `SCAN`/`KEYS` without a hash tag in their pattern.
    init?(_ arguments: [[UInt8]]) {
        guard let first = arguments.first else { return nil }
        let name = String(decoding: first, as: UTF8.self).uppercased()
        switch name {
        case _ where Self.keyless.contains(name):
            self = .anyNode
        case "MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH":
            return nil
        case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO":
            guard arguments.count > 2, let count = Int(String(decoding: arguments[2], as: UTF8.self)) else { return nil }
            guard count > 0 else { self = .anyNode; return }
            guard arguments.count > 3 else { return nil }
            self = .slot(RedisClusterSlot.of(arguments[3]))
        case "XREAD", "XREADGROUP":
            guard let streams = arguments.firstIndex(where: { Self.matches($0, "STREAMS") }), streams + 1 < arguments.count else {
                return nil
            }
            self = .slot(RedisClusterSlot.of(arguments[streams + 1]))
        case "MIGRATE":
            // MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH…] [KEYS key…]
            guard arguments.count > 3 else { return nil }
            if !arguments[3].isEmpty {
                self = .slot(RedisClusterSlot.of(arguments[3]))
            } else if let keys = arguments.firstIndex(where: { Self.matches($0, "KEYS") }), keys + 1 < arguments.count {
                self = .slot(RedisClusterSlot.of(arguments[keys + 1]))
            } else {
                return nil
            }
        case "SCAN", "KEYS":
            let pattern: [UInt8]?
            if name == "KEYS" {
                pattern = arguments.count > 1 ? arguments[1] : nil
            } else {
                pattern = arguments.firstIndex(where: { Self.matches($0, "MATCH") }).flatMap {
                    $0 + 1 < arguments.count ? arguments[$0 + 1] : nil
                }
            }
            guard let pattern, let tag = Self.literalTag(pattern) else { return nil }
            self = .slot(RedisClusterSlot.of(tag))
        default:
            self = arguments.count > 1 ? .slot(RedisClusterSlot.of(arguments[1])) : .anyNode
        }
    }

    /// How many of a command's arguments (its name first) its route needs: 4 (`EVAL`'s keys
    /// start there) but for the commands whose key follows a word anywhere, all.
    static func argumentsNeeded(name: [UInt8]) -> Int {
        switch String(decoding: name, as: UTF8.self).uppercased() {
        case "XREAD", "XREADGROUP", "MIGRATE", "SCAN": .max
        default: 4
        }
    }

    /// Whether `arguments` is a `SCAN` or `KEYS`: routed by a pattern, which a node answers
    /// without `MOVED` even when it does not hold the slot.
    static func scansKeys(_ arguments: [[UInt8]]) -> Bool {
        guard let first = arguments.first, first.count == 4 else { return false }
        let name = String(decoding: first, as: UTF8.self).uppercased()
        return name == "SCAN" || name == "KEYS"
    }

    /// Commands that name no key.
    private static let keyless: Set<String> = [
        "PING", "ECHO", "TIME", "INFO", "SCRIPT", "CLIENT", "CLUSTER", "DBSIZE", "FLUSHDB", "FLUSHALL", "CONFIG",
        "COMMAND", "DEBUG", "ASKING", "READONLY", "READWRITE", "SLOWLOG", "LATENCY", "LASTSAVE", "ROLE", "WAIT",
        "HELLO", "AUTH", "SELECT", "FUNCTION", "ACL", "MEMORY", "MONITOR", "SHUTDOWN", "SAVE", "BGSAVE",
        "BGREWRITEAOF",
    ]

    /// The hash tag of a glob `pattern` when it is literal (no `*?[\` inside the tag), else nil.
    private static func literalTag(_ pattern: [UInt8]) -> [UInt8]? {
        let tag = RedisClusterSlot.hashed(pattern)
        guard tag.count < pattern.count else { return nil }
        let wildcards: Set<UInt8> = [UInt8(ascii: "*"), UInt8(ascii: "?"), UInt8(ascii: "["), UInt8(ascii: "\\")]
        // The part before the tag must be literal too: a wildcard there could match another `{`.
        let beforeTag = pattern[pattern.startIndex..<tag.startIndex]
        guard !tag.contains(where: wildcards.contains), !beforeTag.contains(where: wildcards.contains) else { return nil }
        return Array(tag)
    }

    private static func matches(_ argument: [UInt8], _ word: String) -> Bool {
        String(decoding: argument, as: UTF8.self).uppercased() == word
    }
}
