public import Foundation
public import PushFleetCore

// MARK: - Workers alive

extension CampaignQueue {
    /// ZSET (no hash tag): `worker|topic|environment` → when it last said it was alive, in
    /// milliseconds of the worker's clock.
    static let workersKey = Array("pf:workers".utf8)

    /// A worker that said it was alive.
    public struct WorkerPresence: Hashable, Sendable {
        public var worker: String
        public var topic: String
        public var environment: APNsEnvironment
        public var lastSeen: Date
    }

    /// Says the worker is alive now; a worker calls it every few seconds.
    public func reportAlive(worker: String, topic: String, environment: APNsEnvironment) async throws {
        let member = "\(worker)|\(topic)|\(environment.rawValue)"
        let now = Int(Date().timeIntervalSince1970 * 1000)
        try await self.client.withConnection { connection in
            _ = try connection.checkedCommand(RedisCommand.arguments("ZADD", Self.workersKey, now, member))
        }
    }

    /// Says the worker is gone (it drained).
    public func reportGone(worker: String, topic: String, environment: APNsEnvironment) async throws {
        let member = "\(worker)|\(topic)|\(environment.rawValue)"
        try await self.client.withConnection { connection in
            _ = try connection.checkedCommand(RedisCommand.arguments("ZREM", Self.workersKey, member))
        }
    }

    /// The workers that said they were alive within `window`, newest first. Entries older than an
    /// hour (workers killed without a word) are deleted on the way.
    public func aliveWorkers(within window: Duration) async throws -> [WorkerPresence] {
        let now = Int(Date().timeIntervalSince1970 * 1000)
        let since = now - Int(window.components.seconds * 1000) - Int(window.components.attoseconds / 1_000_000_000_000_000)
        return try await self.client.withConnection { connection in
            _ = try connection.checkedCommand(RedisCommand.arguments("ZREMRANGEBYSCORE", Self.workersKey, "-inf", now - 3_600_000))
            let reply = try connection.checkedCommand(RedisCommand.arguments("ZREVRANGEBYSCORE", Self.workersKey, "+inf", since, "WITHSCORES"))
            guard let items = reply.array, items.count % 2 == 0 else { throw connection.unexpected("ZREVRANGEBYSCORE", reply) }
            var found: [WorkerPresence] = []
            for index in stride(from: 0, to: items.count, by: 2) {
                guard let member = items[index].string, let score = items[index + 1].string.flatMap(Double.init) else { continue }
                let parts = member.split(separator: "|", omittingEmptySubsequences: false)
                guard parts.count == 3, let environment = APNsEnvironment(rawValue: String(parts[2])) else { continue }
                found.append(
                    WorkerPresence(
                        worker: String(parts[0]), topic: String(parts[1]), environment: environment,
                        lastSeen: Date(timeIntervalSince1970: score / 1000)
                    )
                )
            }
            return found
        }
    }
}
