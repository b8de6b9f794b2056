public import Foundation
import Crypto
import PostgresNIO

/// A key of `pushfleet api`, as the server checks it.
public struct APIKey: Sendable, Hashable {
    /// The public half, shown in lists and logs.
    public var id: String
    /// The topics it may act on.
    public var topics: [String]
    public var label: String?
    public var createdAt: Date
    public var revokedAt: Date?

    /// Whether it may act on `topic`: it names it, or `*` (every topic).
    public func allows(_ topic: String) -> Bool { self.revokedAt == nil && (self.topics.contains(topic) || self.allowsEveryTopic) }

    /// Whether it was made for every topic (`*`): only such a key may change what all apps share,
    /// the groups.
    public var allowsEveryTopic: Bool { self.revokedAt == nil && self.topics.contains("*") }
}

extension CampaignStore {
    /// Creates a key for `topics` and returns it with its bearer text, `pf_<id>_<secret>`, which
    /// is shown this once: only the secret's SHA-256 is stored.
    public func createAPIKey(topics: [String], label: String? = nil) async throws -> (key: APIKey, bearer: String) {
        guard !topics.isEmpty, topics.allSatisfy({ !$0.isEmpty }) else {
            throw PostgresStoreError.invalidInput("an API key needs at least one topic, none of them empty")
        }
        let id = Self.randomText(bytes: 9)
        let secret = Self.randomText(bytes: 32)
        let hash = Array(SHA256.hash(data: Array(secret.utf8)))
        let key = try await self.withConnection("create an API key") { connection -> APIKey in
            let rows = try await connection.query(
                """
                INSERT INTO api_keys (key_id, secret_hash, topics, label) VALUES (\(id), \(ByteBuffer(bytes: hash)), \(topics), \(label))
                RETURNING created_at
                """,
                logger: self.logger
            )
            for try await created in rows.decode(Date.self) { return APIKey(id: id, topics: topics, label: label, createdAt: created) }
            throw PostgresStoreError.queryFailed(self.configuration.endpoint, "create an API key", "the insert returned no row")
        }
        return (key, "pf_\(id)_\(secret)")
    }

    /// The key a bearer text names, if its secret matches and it is not revoked; nil otherwise
    /// (malformed, unknown, wrong secret, revoked: the caller answers 401 alike).
    public func authenticate(bearer: String) async throws -> APIKey? {
        let parts = bearer.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "pf", !parts[1].isEmpty, !parts[2].isEmpty, parts[1].utf8.count <= 64 else { return nil }
        let id = String(parts[1])
        let presented = Array(SHA256.hash(data: Array(parts[2].utf8)))
        return try await self.withConnection("check an API key") { connection -> APIKey? in
            let rows = try await connection.query(
                "SELECT secret_hash, topics, label, created_at, revoked_at FROM api_keys WHERE key_id = \(id)", logger: self.logger
            )
            for try await (hash, topics, label, created, revoked) in rows.decode((ByteBuffer, [String], String?, Date, Date?).self) {
                let stored = Array(hash.readableBytesView)
                // Every byte compared, whatever the first difference.
                guard stored.count == presented.count, zip(stored, presented).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0, revoked == nil else {
                    return nil
                }
                return APIKey(id: id, topics: topics, label: label, createdAt: created, revokedAt: revoked)
            }
            return nil
        }
    }

    /// Revokes a key; returns whether it existed and was not revoked yet.
    public func revokeAPIKey(_ id: String) async throws -> Bool {
        try await self.withConnection("revoke an API key") { connection in
            let rows = try await connection.query(
                "UPDATE api_keys SET revoked_at = now() WHERE key_id = \(id) AND revoked_at IS NULL RETURNING 1", logger: self.logger
            )
            for try await _ in rows { return true }
            return false
        }
    }

    /// Every key, newest first, secrets aside.
    public func apiKeys() async throws -> [APIKey] {
        try await self.withConnection("list API keys") { connection in
            let rows = try await connection.query(
                "SELECT key_id, topics, label, created_at, revoked_at FROM api_keys ORDER BY created_at DESC, key_id", logger: self.logger
            )
            var keys: [APIKey] = []
            for try await (id, topics, label, created, revoked) in rows.decode((String, [String], String?, Date, Date?).self) {
                keys.append(APIKey(id: id, topics: topics, label: label, createdAt: created, revokedAt: revoked))
            }
            return keys
        }
    }

    /// `bytes` random bytes as lowercase base-32 text (letters and digits, no `_`).
    private static func randomText(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)
        var bits = 0
        var value = 0
        var out: [UInt8] = []
        for _ in 0..<count {
            value = (value << 8) | Int(UInt8.random(in: 0...255, using: &generator))
            bits += 8
            while bits >= 5 {
                out.append(alphabet[(value >> (bits - 5)) & 31])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[(value << (5 - bits)) & 31]) }
        return String(decoding: out, as: UTF8.self)
    }
}
