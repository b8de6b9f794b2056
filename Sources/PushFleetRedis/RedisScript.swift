import Crypto

/// A Lua script with its SHA-1, called with `EVALSHA` and loaded on demand.
///
/// The SHA-1 is computed here, so no round trip is needed to learn it. When Redis answers
/// `NOSCRIPT` (after a restart, failover or `SCRIPT FLUSH`), ``RedisConnection/evaluate(_:keys:arguments:)``
/// sends the source with `EVAL`, which also caches it again.
public struct RedisScript: Hashable, Sendable {
    /// The Lua source, exactly as sent to Redis.
    public let source: String
    /// The SHA-1 of ``source`` in lowercase hex, as Redis names the script.
    public let sha1: String

    /// - Parameter source: The Lua source. Declare every key the script touches in `KEYS`.
    public init(_ source: String) {
        self.source = source
        self.sha1 = Insecure.SHA1.hash(data: Array(source.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
