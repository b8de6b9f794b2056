import Foundation
@testable import PushFleetAPI
@testable import PushFleetPostgres
import Synchronization
import Testing

/// The API's key cache on an injected clock: an accepted key is taken on trust for the lifetime
/// and looked up again after it (so a revocation lands then), checked again in the background
/// when used in the second half of it, a refused bearer is looked up every time, a lifetime of
/// zero caches nothing, and the cache stays within its capacity.
@Suite struct APIKeyCacheTests {
    final class Lookups: Sendable {
        let count = Atomic<Int>(0)
        let answer: Mutex<APIKey?>

        init(_ answer: APIKey?) { self.answer = Mutex(answer) }

        func callAsFunction(_ bearer: String) async throws -> APIKey? {
            self.count.add(1, ordering: .relaxed)
            return self.answer.withLock { $0 }
        }

        var made: Int { self.count.load(ordering: .relaxed) }
    }

    final class Clock: Sendable {
        let instant = Mutex(ContinuousClock.now)
        func advance(_ by: Duration) { self.instant.withLock { $0 += by } }
        var now: ContinuousClock.Instant { self.instant.withLock { $0 } }
    }

    static let key = APIKey(id: "k1", topics: ["com.example.app"], label: nil, createdAt: Date(timeIntervalSince1970: 0))

    @Test func anAcceptedKeyIsTrustedForItsLifetimeThenCheckedAgain() async throws {
        let clock = Clock()
        let cache = APIKeyCache(lifetime: .seconds(5)) { clock.now }
        let lookups = Lookups(Self.key)
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key)
        // In the first half of its lifetime (the second half is checked again in the background,
        // below).
        clock.advance(.milliseconds(2_499))
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key)
        await cache.settle()
        #expect(lookups.made == 1)
        // Revoked meanwhile: refused once the entry has expired, and not kept.
        lookups.answer.withLock { $0 = nil }
        clock.advance(.milliseconds(2_501))
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == nil)
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == nil)
        #expect(lookups.made == 3)
        #expect(cache.count == 0)
    }

    /// A key in steady use: in the second half of its entry's lifetime it is answered from the
    /// entry and checked again meanwhile, so it never waits on a look-up; a revocation found by
    /// such a check removes the entry, and the next request is refused.
    @Test func anEntryUsedInItsSecondHalfIsCheckedAgainInTheBackground() async throws {
        let clock = Clock()
        let cache = APIKeyCache(lifetime: .seconds(5)) { clock.now }
        let lookups = Lookups(Self.key)
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key)
        clock.advance(.milliseconds(2_499))
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key)
        await cache.settle()
        #expect(lookups.made == 1, "first half: no check")
        clock.advance(.milliseconds(1))
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key)
        await cache.settle()
        #expect(lookups.made == 2, "second half: checked again in the background")
        // Trusted for 5 s from that check (t = 2.5 s): at t = 7.4 s the entry still answers.
        clock.advance(.milliseconds(2_499))
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key)
        await cache.settle()
        #expect(lookups.made == 2, "t = 4.999 s: the first half of the new entry")
        // Revoked: the next background check finds it, and the request after that is refused.
        lookups.answer.withLock { $0 = nil }
        clock.advance(.milliseconds(1))
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key, "answered from the entry")
        await cache.settle()
        #expect(lookups.made == 3)
        #expect(cache.count == 0)
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == nil)
        #expect(lookups.made == 4)
    }

    /// A background check that fails (Postgres away) changes nothing: the entry expires at its
    /// time, and the request after it gets the look-up's error.
    @Test func aFailedBackgroundCheckLeavesTheEntryToExpire() async throws {
        struct Down: Error {}
        let clock = Clock()
        let cache = APIKeyCache(lifetime: .seconds(5)) { clock.now }
        let failing = Atomic<Bool>(false)
        let lookups = Atomic<Int>(0)
        let lookup: APIKeyCache.Lookup = { _ in
            lookups.add(1, ordering: .relaxed)
            if failing.load(ordering: .relaxed) { throw Down() }
            return Self.key
        }
        _ = try await cache.key(for: "pf_k1_s", lookup: lookup)
        failing.store(true, ordering: .relaxed)
        clock.advance(.seconds(3))
        #expect(try await cache.key(for: "pf_k1_s", lookup: lookup) == Self.key)
        await cache.settle()
        #expect(lookups.load(ordering: .relaxed) == 2)
        #expect(cache.count == 1)
        clock.advance(.seconds(2))
        await #expect(throws: Down.self) { try await cache.key(for: "pf_k1_s", lookup: lookup) }
    }

    @Test func anotherBearerOfTheSameKeyIsLookedUpItself() async throws {
        let clock = Clock()
        let cache = APIKeyCache(lifetime: .seconds(5)) { clock.now }
        let lookups = Lookups(Self.key)
        _ = try await cache.key(for: "pf_k1_right", lookup: lookups.callAsFunction)
        lookups.answer.withLock { $0 = nil }
        #expect(try await cache.key(for: "pf_k1_wrong", lookup: lookups.callAsFunction) == nil)
        #expect(try await cache.key(for: "pf_k1_right", lookup: lookups.callAsFunction) == Self.key)
        #expect(lookups.made == 2)
    }

    @Test func aLifetimeOfZeroChecksEveryRequest() async throws {
        let cache = APIKeyCache(lifetime: .zero)
        let lookups = Lookups(Self.key)
        for _ in 0..<3 { #expect(try await cache.key(for: "pf_k1_s", lookup: lookups.callAsFunction) == Self.key) }
        #expect(lookups.made == 3)
        #expect(cache.count == 0)
    }

    @Test func theCacheStaysWithinItsCapacity() async throws {
        let clock = Clock()
        let cache = APIKeyCache(lifetime: .seconds(5), capacity: 3) { clock.now }
        let lookups = Lookups(Self.key)
        for bearer in ["a", "b", "c"] { _ = try await cache.key(for: bearer, lookup: lookups.callAsFunction) }
        #expect(cache.count == 3)
        // Full of live entries: they all go for the new one.
        _ = try await cache.key(for: "d", lookup: lookups.callAsFunction)
        #expect(cache.count == 1)
        // Full again, two of them expired: only those go.
        _ = try await cache.key(for: "e", lookup: lookups.callAsFunction)
        clock.advance(.seconds(3))
        _ = try await cache.key(for: "f", lookup: lookups.callAsFunction)
        clock.advance(.seconds(2))
        _ = try await cache.key(for: "g", lookup: lookups.callAsFunction)
        #expect(cache.count == 2)
        #expect(lookups.made == 7)
        // "f" is still live (in the first half of its lifetime), so not looked up again.
        _ = try await cache.key(for: "f", lookup: lookups.callAsFunction)
        await cache.settle()
        #expect(lookups.made == 7)
    }
}
