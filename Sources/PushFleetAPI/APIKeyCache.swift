import Crypto
import PushFleetPostgres
import Synchronization

/// Keys the API checked a moment ago, so that a doorbell's ring does not wait on Postgres to
/// learn again what it learned then.
///
/// Only accepted keys are kept, by the SHA-256 of the bearer text (the secret itself is not
/// kept), each for ``lifetime`` from the check that accepted it: a key revoked meanwhile is still
/// accepted by this process until then. A bearer that fails is looked up every time. A lifetime
/// of zero checks every request.
final class APIKeyCache: Sendable {
    /// How long an accepted key is taken on trust.
    let lifetime: Duration
    /// The most keys kept; past it, the expired go, and if none has, all do.
    let capacity: Int
    private let now: @Sendable () -> ContinuousClock.Instant
    private let entries = Mutex<[SHA256Digest: (key: APIKey, until: ContinuousClock.Instant)]>([:])

    init(lifetime: Duration, capacity: Int = 10_000, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.lifetime = lifetime
        self.capacity = max(1, capacity)
        self.now = now
    }

    /// The key `bearer` names: from the cache while its entry lasts, from `lookup` otherwise.
    func key(for bearer: String, lookup: (String) async throws -> APIKey?) async throws -> APIKey? {
        guard self.lifetime > .zero else { return try await lookup(bearer) }
        let digest = SHA256.hash(data: Array(bearer.utf8))
        let checkedAt = self.now()
        if let entry = self.entries.withLock({ $0[digest] }), checkedAt < entry.until { return entry.key }
        guard let key = try await lookup(bearer) else {
            self.entries.withLock { $0[digest] = nil }
            return nil
        }
        self.entries.withLock { entries in
            if entries[digest] == nil, entries.count >= self.capacity {
                entries = entries.filter { checkedAt < $0.value.until }
                if entries.count >= self.capacity { entries.removeAll() }
            }
            entries[digest] = (key, checkedAt + self.lifetime)
        }
        return key
    }

    /// Keys kept, expired or not.
    var count: Int { self.entries.withLock { $0.count } }
}
