import Foundation
import PushFleetCore

/// The Redis side of campaigns: staged shards, leases, checkpoints, counters and events.
///
/// A campaign's keys share the hash tag `{<campaign id>}` (see the key list in `CampaignKeys`), and
/// every change to more than one of them is one Lua script (`CampaignScripts`), atomic and fenced.
/// The per-topic set `pf:active:<topic>:<environment>` has no tag and is changed by single commands.
///
/// - Launch: ``stageShard(campaign:shard:tokens:)``, ``publish(_:)``, or ``discard(campaign:shardCount:)``.
/// - Workers: ``claim(campaign:worker:leaseMilliseconds:)``, ``read(_:from:count:)``,
///   ``checkpoint(_:cursor:accepted:rejections:resent:leaseMilliseconds:)``, ``complete(_:)``,
///   ``release(_:cursor:countAttempt:)``.
/// - Coordinator: ``snapshot(campaign:)``, ``events(campaign:after:count:)``,
///   ``reapExpiredLeases(campaign:maximumAttempts:)``, ``remove(campaign:topic:environment:)``, and
///   after Redis lost a queue, ``restore(_:staged:)``.
///
/// Each call is one hop to the client's Redis thread. Run Redis with `maxmemory-policy noeviction`.
public struct CampaignQueue: Sendable {
    /// The client every call goes through.
    public let client: RedisClient

    /// Shard ids reaped per ``reapExpiredLeases(campaign:maximumAttempts:)`` call, at most, so one
    /// call never stalls Redis; the coordinator's next pass takes the rest.
    public static let reapLimit = 1000

    /// Tokens per `RPUSH` when staging, and keys per `DEL` when deleting.
    static let batchSize = 1000

    /// How long a staged shard list lives unless it is published: a day, far beyond any launch.
    public static let stagedLifetimeSeconds = 86_400

    public init(client: RedisClient) {
        self.client = client
    }

    /// Adds the campaign to the active set of its kind (`pf:active:…` or `pf:now:…`), where
    /// workers look for work; idempotent.
    static func activate(
        _ campaign: UUID, topic: String, environment: APNsEnvironment, kind: CampaignKind, on connection: RedisConnection
    ) throws(RedisError) {
        let active = CampaignKeys.active(topic: topic, environment: environment, kind: kind)
        _ = try connection.checkedCommand(RedisCommand.arguments("SADD", active, campaign.uuidString.lowercased()))
    }

    /// Adds a published campaign to its active set; a notification also wakes one worker waiting in
    /// ``waitForNotification(topic:environment:timeout:)``, after it can be found (best effort).
    static func activate(_ descriptor: CampaignDescriptor, on connection: RedisConnection) throws(RedisError) {
        let d = descriptor.definition
        guard d.kind == .notification else {
            try self.activate(descriptor.id, topic: d.topic, environment: d.environment, kind: d.kind, on: connection)
            return
        }
        let id = descriptor.id.uuidString.lowercased()
        let active = CampaignKeys.active(topic: d.topic, environment: d.environment, kind: d.kind)
        let wake = CampaignKeys.wake(topic: d.topic, environment: d.environment)
        // One round trip, a ring's latency being made of them. The pipeline runs in order (per
        // node in a cluster, the set's node first), so a worker woken finds the notification.
        let replies = try? connection.pipeline([
            RedisCommand.arguments("SADD", active, id),
            RedisCommand.arguments("RPUSH", wake, id),
            RedisCommand.arguments("LTRIM", wake, -CampaignKeys.wakeCap, -1),
        ])
        if case .integer = replies?.first { return }
        // The wake-up is best effort (the notification is published already, and a worker finds
        // it within a second without one); the set entry is not: it is made, or this throws.
        try self.activate(descriptor.id, topic: d.topic, environment: d.environment, kind: d.kind, on: connection)
    }

    /// Deletes every key of the campaign, shard lists `0..<shardCount` included (or, when
    /// `shardCount` is nil, whatever `SCAN` finds under the campaign's prefix), but the mark that
    /// its queue was removed (``CampaignKeys/removed``), which only expires.
    static func deleteAll(_ keys: CampaignKeys, shardCount: Int?, on connection: RedisConnection) throws(RedisError) {
        var doomed = keys.fixed
        if let shardCount {
            doomed += (0..<max(0, shardCount)).map { keys.shard($0) }
        } else {
            let removed = keys.removed
            doomed += try self.scan(keys.pattern, on: connection).filter { $0 != removed }
        }
        try self.delete(doomed, on: connection)
    }

    /// Deletes `keys`, ``batchSize`` per `DEL`, in one pipeline.
    static func delete(_ keys: [[UInt8]], on connection: RedisConnection) throws(RedisError) {
        var commands: [[[UInt8]]] = []
        for start in stride(from: 0, to: keys.count, by: Self.batchSize) {
            commands.append([Array("DEL".utf8)] + keys[start..<min(start + Self.batchSize, keys.count)])
        }
        _ = try connection.checkedPipeline(commands)
    }

    /// Every key matching `pattern`, by `SCAN` (never `KEYS`, which blocks the server).
    static func scan(_ pattern: [UInt8], on connection: RedisConnection) throws(RedisError) -> [[UInt8]] {
        var cursor: [UInt8] = Array("0".utf8)
        var found: [[UInt8]] = []
        repeat {
            let reply = try connection.checkedCommand(RedisCommand.arguments("SCAN", cursor, "MATCH", pattern, "COUNT", 1000))
            guard let parts = reply.array, parts.count == 2, let next = parts[0].bytes, let batch = parts[1].array else {
                throw connection.unexpected("SCAN", reply)
            }
            for key in batch {
                guard let bytes = key.bytes else { throw connection.unexpected("SCAN", reply) }
                found.append(bytes)
            }
            cursor = next
        } while cursor != Array("0".utf8)
        return found
    }
}
