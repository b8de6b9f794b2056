import Crypto
import PushFleetPostgres
import Synchronization

/// Keys the API checked a moment ago, so that a doorbell's ring does not wait on Postgres to
/// learn again what it learned then.
///
/// Only accepted keys are kept, by the SHA-256 of the bearer text (the secret itself is not
/// kept), each for ``lifetime`` from the check that accepted it: a key revoked meanwhile is still
/// accepted by this process until then. A key used in the second half of its entry's lifetime is
/// checked again in the background (the request is answered from the entry): a key in steady use
/// never waits on Postgres, and is still never trusted longer than ``lifetime`` after a check
/// began. A bearer that fails is looked up every time. A lifetime of zero checks every request.
final class APIKeyCache: Sendable {
    typealias Lookup = @Sendable (String) async throws -> APIKey?

    /// How long an accepted key is taken on trust.
    let lifetime: Duration
    /// The most keys kept; past it, the expired go, and if none has, all do.
    let capacity: Int
    private let now: @Sendable () -> ContinuousClock.Instant
    private let entries = Mutex<[SHA256Digest: (key: APIKey, until: ContinuousClock.Instant)]>([:])
    /// The background checks under way, by bearer digest.
    private let refreshing = Mutex<[SHA256Digest: Task<Void, Never>]>([:])

    init(lifetime: Duration, capacity: Int = 10_000, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.lifetime = lifetime
        self.capacity = max(1, capacity)
        self.now = now
    }

    /// The key `bearer` names: from the cache while its entry lasts, from `lookup` otherwise.
    func key(for bearer: String, lookup: @escaping Lookup) async throws -> APIKey? {
        guard self.lifetime > .zero else { return try await lookup(bearer) }
        let digest = SHA256.hash(data: Array(bearer.utf8))
        let checkedAt = self.now()
        if let entry = self.entries.withLock({ $0[digest] }), checkedAt < entry.until {
            if entry.until - checkedAt <= self.lifetime / 2 { self.refresh(bearer, digest, lookup: lookup) }
            return entry.key
        }
        return try await self.check(bearer, digest, lookup: lookup)
    }

    /// Looks `bearer` up and keeps the answer: an accepted key for ``lifetime`` from when the
    /// look-up began, a refused one not at all.
    private func check(_ bearer: String, _ digest: SHA256Digest, lookup: Lookup) async throws -> APIKey? {
        let checkedAt = self.now()
        guard let key = try await lookup(bearer) else {
            self.entries.withLock { $0[digest] = nil }
            return nil
        }
        self.entries.withLock { entries in
            if entries[digest] == nil, entries.count >= self.capacity {
                entries = entries.filter { checkedAt < $0.value.until }
                if entries.count >= self.capacity { entries.removeAll() }
            }
            // A later check's entry stays.
            if let kept = entries[digest], kept.until > checkedAt + self.lifetime { return }
            entries[digest] = (key, checkedAt + self.lifetime)
        }
        return key
    }

    /// Checks `bearer` again in the background, once at a time; a failed check leaves the entry to
    /// expire.
    private func refresh(_ bearer: String, _ digest: SHA256Digest, lookup: @escaping Lookup) {
        self.refreshing.withLock { refreshing in
            guard refreshing[digest] == nil else { return }
            refreshing[digest] = Task {
                _ = try? await self.check(bearer, digest, lookup: lookup)
                _ = self.refreshing.withLock { $0.removeValue(forKey: digest) }
            }
        }
    }

    /// Waits for the background checks under way.
    func settle() async {
        while let task = self.refreshing.withLock({ $0.values.first }) { await task.value }
    }

    /// Keys kept, expired or not.
    var count: Int { self.entries.withLock { $0.count } }
}
