import Foundation
import PostgresNIO
import PushFleetCore

/// One registry status change, as `markTokens` and `apply` write them.
struct TokenMark: Sendable {
    var token: DeviceToken
    var status: TokenStatus
    var reason: RejectionReason
    var since: Date
}

extension CampaignStore {
    /// Tokens per statement: one bind array each, well inside the protocol's 1 GB message limit.
    static let batchSize = 10_000

    /// Throws ``PostgresStoreError`` with code `invalidInput` if `topic` is empty.
    static func checkTopic(_ topic: String) throws {
        guard !topic.isEmpty else { throw PostgresStoreError.invalidInput("the topic (bundle id) is empty") }
    }

    /// The id of the app `topic` and `environment` name, created if new.
    func appID(topic: String, environment: APNsEnvironment, on connection: PostgresConnection) async throws -> Int64 {
        try Self.checkTopic(topic)
        let found = try await connection.query(
            "SELECT app_id FROM apps WHERE topic = \(topic) AND environment = \(environment.rawValue)", logger: self.logger
        )
        for try await id in found.decode(Int64.self) { return id }
        // DO UPDATE rather than DO NOTHING: it returns the id even when a concurrent transaction inserted it.
        let inserted = try await connection.query(
            """
            INSERT INTO apps (topic, environment) VALUES (\(topic), \(environment.rawValue))
            ON CONFLICT (topic, environment) DO UPDATE SET topic = EXCLUDED.topic RETURNING app_id
            """,
            logger: self.logger
        )
        for try await id in inserted.decode(Int64.self) { return id }
        throw PostgresStoreError.queryFailed(self.configuration.endpoint, "create the app \(topic) (\(environment))", "no id returned")
    }

    /// Writes status changes for one app; see ``markTokens(_:topic:environment:)``. With
    /// `addingUnknown` false, tokens the registry does not hold are left out: for such a token an
    /// update that finds no row costs Postgres less than an upsert that adds one (about 3 against 6 µs
    /// in an app of 800,000 tokens, 0.85 against 4 µs in an empty one; psql, 10,000-row statements;
    /// docs/benchmarks.md, 2026-11-29). Either statement changes a row only where it was registered
    /// before the verdict, and locks rows in the marks' (byte) order, as `importTokens` does.
    func mark(_ marks: [TokenMark], app: Int64, addingUnknown: Bool = true, on connection: PostgresConnection) async throws {
        let unique = Self.latestInByteOrder(marks)
        guard !unique.isEmpty else { return }
        let writeAll = {
            for chunk in Self.chunks(unique) {
                try await connection.query(Self.markStatement(chunk, app: app, addingUnknown: addingUnknown), logger: self.logger)
            }
        }
        if addingUnknown { try await writeAll() } else { try await self.withKeyProbes(on: connection, writeAll) }
    }

    /// One batch of ``mark(_:app:addingUnknown:on:)``: an upsert, or an update of the rows that exist.
    private static func markStatement(_ chunk: ArraySlice<TokenMark>, app: Int64, addingUnknown: Bool) -> PostgresQuery {
        let (tokens, statuses, reasons, sinces) = (TokenArray(chunk.map(\.token)), chunk.map(\.status.rawValue), chunk.map(\.reason.rawValue), chunk.map(\.since))
        guard addingUnknown else {
            return """
                UPDATE device_tokens AS d SET
                    status = u.status,
                    invalid_since = CASE WHEN u.status = 'active' THEN NULL ELSE GREATEST(d.invalid_since, u.since) END,
                    invalid_reason = CASE WHEN u.status = 'active' THEN NULL ELSE u.reason END
                FROM unnest(\(tokens), \(statuses), \(reasons), \(sinces)) AS u(token, status, reason, since)
                WHERE d.app_id = \(app) AND d.token = u.token AND d.registered_at < u.since
                """
        }
        return """
            INSERT INTO device_tokens AS d (app_id, token, status, registered_at, invalid_since, invalid_reason)
            SELECT \(app), u.token, u.status, u.since,
                   CASE WHEN u.status = 'active' THEN NULL ELSE u.since END,
                   CASE WHEN u.status = 'active' THEN NULL ELSE u.reason END
            FROM unnest(\(tokens), \(statuses), \(reasons), \(sinces)) AS u(token, status, reason, since)
            ON CONFLICT (app_id, token) DO UPDATE SET
                status = EXCLUDED.status,
                invalid_since = CASE WHEN EXCLUDED.status = 'active' THEN NULL
                                     ELSE GREATEST(d.invalid_since, EXCLUDED.invalid_since) END,
                invalid_reason = EXCLUDED.invalid_reason
            WHERE d.registered_at < EXCLUDED.registered_at
            """
    }

    /// Runs `body`, whose statements join an unnest of marks to `device_tokens`, with the planner
    /// held to one key probe per mark, in the marks' order (a nested loop over an index scan), and
    /// puts the transaction's settings back after. Left to itself the planner hash-joins a
    /// 10,000-mark batch with the whole table, above all when the table's statistics predate a
    /// large import (EXPLAIN ANALYZE, 800,000 tokens: 453 ms a batch against 96 ms), and the rows are
    /// then locked in the table's order, not the marks'.
    private func withKeyProbes(on connection: PostgresConnection, _ body: () async throws -> Void) async throws {
        let current = try await connection.query(
            "SELECT current_setting('enable_seqscan'), current_setting('enable_hashjoin'), current_setting('enable_mergejoin')",
            logger: self.logger
        )
        var saved = ("on", "on", "on")
        for try await row in current.decode((String, String, String).self) { saved = row }
        func set(_ values: (String, String, String)) async throws {
            let rows = try await connection.query(
                """
                SELECT set_config('enable_seqscan', \(values.0), true), set_config('enable_hashjoin', \(values.1), true),
                       set_config('enable_mergejoin', \(values.2), true)
                """,
                logger: self.logger
            )
            for try await _ in rows {}
        }
        try await set(("off", "off", "off"))
        try await body()
        try await set(saved)
    }

    /// Each token's latest mark (of equally late ones, the last given), in byte order of the token:
    /// one statement may not update a row twice, and concurrent writers then lock rows in the same
    /// order (as with `distinct(_:)`). Sorts tokens with their positions rather than the marks, whose
    /// copies retain and release their strings, and picks the latest from each run of one token.
    static func latestInByteOrder(_ marks: [TokenMark]) -> [TokenMark] {
        // (token, position) pairs: the sort moves them without retains, and its comparisons borrow
        // the tokens in place.
        var order = marks.indices.map { (token: marks[$0].token, position: $0) }
        order.sort { $0.token.precedesInByteOrder($1.token) }
        var unique: [TokenMark] = []
        unique.reserveCapacity(marks.count)
        var run = order.startIndex
        while run < order.endIndex {
            var latest = order[run].position
            var next = run + 1
            while next < order.endIndex, order[next].token == order[run].token {
                let candidate = order[next].position
                if (marks[candidate].since, candidate) > (marks[latest].since, latest) { latest = candidate }
                next += 1
            }
            unique.append(marks[latest])
            run = next
        }
        return unique
    }

    /// Each token once, in byte order: concurrent upserts then lock shared rows in the same order and
    /// cannot deadlock each other.
    static func distinct(_ tokens: [DeviceToken]) -> [DeviceToken] {
        var seen = Set<DeviceToken>(minimumCapacity: tokens.count)
        return tokens.filter { seen.insert($0).inserted }.sorted { $0.precedesInByteOrder($1) }
    }

    static func chunks<Element>(_ elements: [Element]) -> [ArraySlice<Element>] {
        stride(from: 0, to: elements.count, by: Self.batchSize).map {
            elements[$0..<min($0 + Self.batchSize, elements.count)]
        }
    }
}
