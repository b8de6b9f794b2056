public import Foundation

// MARK: - Coordinator: the snapshot it folds, and rebuilding a queue Redis lost

/// A campaign's counters and shard cursors, read in one step: the counters hold exactly the
/// outcomes below each shard's cursor. What the coordinator folds into Postgres, and what a queue
/// Redis lost is rebuilt from.
public struct QueueSnapshot: Hashable, Sendable {
    public var counters: CampaignCounters
    /// Shard id → the first index without an outcome; a finished shard's is its length. A shard
    /// without a checkpoint yet is absent (its cursor is 0).
    public var cursors: [Int: Int]
    /// Shard id → the end of what was handed to senders (at or below the cursor when nothing is out).
    /// A shard never claimed, or finished, is absent.
    public var sentMarks: [Int: Int]
    /// Tokens handed to senders past their shard's cursor: possibly sent, not yet counted.
    public var inFlight: Int
    /// The snapshot's number: each snapshot of a queue is numbered above the one before.
    public var fold: Int

    public init(counters: CampaignCounters, cursors: [Int: Int], sentMarks: [Int: Int], inFlight: Int, fold: Int) {
        self.counters = counters
        self.cursors = cursors
        self.sentMarks = sentMarks
        self.inFlight = inFlight
        self.fold = fold
    }
}

/// Everything a lost queue is rebuilt from (Postgres' copy of the last snapshot folded).
public struct QueueRestoration: Sendable {
    /// The meta hash to write; its status (running or paused) is the campaign's.
    public var descriptor: CampaignDescriptor
    /// The launch whose stored shards the queue holds, kept in the meta hash.
    public var launch: String
    /// Per shard (the index is the shard id): its length, and its cursor as last folded.
    public var tokenCounts: [Int]
    public var cursors: [Int]
    /// Per shard, its `sent` mark as last folded: the rebuild's `in_flight` count covers re-sends
    /// up to here, and lost runs reported later only what lies past it.
    public var sentMarks: [Int]
    /// Shards given up on: rebuilt, but in the dead list rather than pending.
    public var deadShards: [Int]
    /// Counters as last folded. `doneShards` is ignored: it is the count of shards whose cursor
    /// reached their length.
    public var counters: CampaignCounters
    /// The last snapshot number folded: the rebuilt queue numbers its snapshots on from it.
    public var fold: Int
    /// Every fence the rebuilt queue hands out is above this, and so above any fence of the lost
    /// queue: a worker still holding a lease of it can never match. See ``fenceBase(generation:)``.
    public var fenceBase: Int

    public init(
        descriptor: CampaignDescriptor, launch: String, tokenCounts: [Int], cursors: [Int], sentMarks: [Int],
        deadShards: [Int], counters: CampaignCounters, fold: Int, fenceBase: Int
    ) {
        self.descriptor = descriptor
        self.launch = launch
        self.tokenCounts = tokenCounts
        self.cursors = cursors
        self.sentMarks = sentMarks
        self.deadShards = deadShards
        self.counters = counters
        self.fold = fold
        self.fenceBase = fenceBase
    }

    /// The fence base of a queue's `generation`th rebuild: 10¹² claims per generation, far more
    /// than any campaign makes, so each generation's fences are above every earlier one's.
    public static func fenceBase(generation: Int) -> Int { generation * 1_000_000_000_000 }

    /// The shards with tokens left: their lists must be staged before ``CampaignQueue/restore(_:staged:)``.
    public var unfinishedShards: [Int] {
        self.tokenCounts.indices.filter { self.cursors[$0] < self.tokenCounts[$0] }
    }
}

extension CampaignQueue {
    /// The campaign's counters and cursors, read atomically; nil when its meta hash is missing
    /// (Redis lost the queue, or the campaign was removed).
    public func snapshot(campaign: UUID) async throws -> QueueSnapshot? {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection -> QueueSnapshot? in
            let reply = try connection.checkedEvaluate(
                "snapshot", CampaignScripts.snapshot, keys: [keys.meta, keys.stats, keys.cursor, keys.sent, keys.delivered], arguments: []
            )
            if reply.isNull { return nil }
            guard let parts = reply.array, parts.count == 5 else { throw connection.unexpected("the snapshot script", reply) }
            return QueueSnapshot(
                counters: try connection.counters(parts[0], "the snapshot script (stats)"),
                cursors: try connection.shardMarks(parts[1], "the snapshot script (cursors)"),
                sentMarks: try connection.shardMarks(parts[4], "the snapshot script (sent)"),
                inFlight: try connection.integer(parts[2], "the snapshot script"), fold: try connection.integer(parts[3], "the snapshot script")
            )
        }
    }

    /// Rebuilds a queue Redis lost, from the shard lists staged under `launch`
    /// (``stageShards(campaign:launch:shards:)``, one per ``QueueRestoration/unfinishedShards``) and
    /// `restoration`, in one atomic step; then the campaign joins its active set again.
    /// - Returns: true if rebuilt now; false when the campaign's meta hash exists or its finished
    ///   queue was removed (``CampaignKeys/removed``), in which case nothing changed and the staged
    ///   lists were deleted.
    /// - Throws: ``RedisError`` if a staged list is missing (nothing is changed then).
    @discardableResult
    public func restore(_ restoration: QueueRestoration, staged launch: String) async throws -> Bool {
        let descriptor = restoration.descriptor
        let keys = CampaignKeys(descriptor.id)
        let unfinished = restoration.unfinishedShards
        let dead = Set(restoration.deadShards)
        let done = restoration.tokenCounts.count - unfinished.count

        var arguments: [[UInt8]] = [unfinished.count.redisArgument, restoration.fenceBase.redisArgument]
        func section(_ values: [[UInt8]]) {
            arguments.append(values.count.redisArgument)
            arguments += values
        }
        section(
            descriptor.metaFields + [
                Array("launch".utf8), Array(restoration.launch.utf8), Array("fold".utf8), restoration.fold.redisArgument,
                Array("fence_base".utf8), restoration.fenceBase.redisArgument,
            ]
        )
        section(unfinished.filter { !dead.contains($0) }.map(\.redisArgument))
        section(unfinished.filter { dead.contains($0) }.map(\.redisArgument))
        section(restoration.cursors.indices.filter { restoration.cursors[$0] > 0 }.flatMap { [$0.redisArgument, restoration.cursors[$0].redisArgument] })
        var stats = restoration.counters
        stats.doneShards = done
        section(stats.fields)
        section(unfinished.flatMap { [$0.redisArgument, max(restoration.cursors[$0], restoration.sentMarks[$0]).redisArgument] })

        let scriptKeys = [
            keys.meta, keys.pending, keys.cursor, keys.stats, keys.fence, keys.dead, keys.sent, keys.attempts, keys.leases, keys.owner,
            keys.checkpoints, keys.events, keys.rebuilt, keys.delivered,
        ] + unfinished.map { keys.staged($0, launch: launch) } + unfinished.map { keys.shard($0) } + [keys.removed]
        return try await self.client.withConnection { [arguments] connection in
            let reply = try connection.checkedEvaluate("restore", CampaignScripts.restore, keys: scriptKeys, arguments: arguments)
            switch try connection.integer(reply, "the restore script") {
            case 1:
                try CampaignQueue.activate(descriptor, on: connection)
                return true
            case 0:
                try CampaignQueue.delete(unfinished.map { keys.staged($0, launch: launch) }, on: connection)
                return false
            default:
                throw RedisError(
                    code: .unexpectedReply,
                    message: "rebuilding campaign \(descriptor.id.uuidString.lowercased()) at \(connection.lastServer): "
                        + "a shard list staged by \(launch) is missing; nothing was changed"
                )
            }
        }
    }

    /// Records that Postgres now holds the snapshot numbered `fold` (see ``foldState(campaign:)``).
    public func markFolded(campaign: UUID, fold: Int) async throws {
        let keys = CampaignKeys(campaign)
        try await self.client.withConnection { connection in
            _ = try connection.checkedEvaluate("markFolded", CampaignScripts.markFolded, keys: [keys.meta], arguments: [fold.redisArgument])
        }
    }

    /// Where the campaign's queue stands between Redis and Postgres; nil when Redis has no queue
    /// for it (lost and not rebuilt yet, or over and removed).
    public func foldState(campaign: UUID) async throws -> QueueFoldState? {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection -> QueueFoldState? in
            let reply = try connection.checkedCommand(RedisCommand.arguments("HMGET", keys.meta, "status", "fence_base", "fold", "folded"))
            guard case .array(let fields) = reply, fields.count == 4 else { throw connection.unexpected("HMGET of the meta hash", reply) }
            guard fields[0].string != nil else { return nil }
            func number(_ reply: RedisReply) throws(RedisError) -> Int {
                guard let text = reply.string else { return 0 }
                guard let value = Int(text) else { throw connection.unexpected("HMGET of the meta hash", reply) }
                return value
            }
            return QueueFoldState(fenceBase: try number(fields[1]), fold: try number(fields[2]), folded: try number(fields[3]))
        }
    }

    /// Counts as `resent` what a run of a lost queue handed to senders past what the rebuild counted
    /// (see ``CampaignScripts/countLostRun``): the rebuilt queue sends those positions again.
    /// - Parameters:
    ///   - lease: The run's lease, of the queue that was lost.
    ///   - reached: The end of the positions the run handed to its channel.
    public func countLostRun(_ lease: ShardLease, reached: Int) async throws -> LostRunCount {
        let keys = CampaignKeys(lease.campaign)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedEvaluate(
                "countLostRun", CampaignScripts.countLostRun, keys: [keys.meta, keys.rebuilt, keys.stats],
                arguments: [lease.shard.redisArgument, lease.fence.redisArgument, reached.redisArgument]
            )
            switch try connection.integer(reply, "the countLostRun script") {
            case -1: return .queueMissing
            case -2: return .sameQueue
            case let count where count >= 0: return .counted(count)
            default: throw connection.unexpected("the countLostRun script", reply)
            }
        }
    }

    /// Deletes every key of the campaign (a queue Redis brought back from an old copy), keeping
    /// its active-set entry; ``restore(_:staged:)`` then rebuilds it.
    public func forget(campaign: UUID, shardCount: Int) async throws {
        let keys = CampaignKeys(campaign)
        try await self.client.withConnection { connection in try CampaignQueue.deleteAll(keys, shardCount: shardCount, on: connection) }
    }
}

/// A queue's generation and snapshot numbers, as a worker needs them to know whether a run it
/// ended is safe in Postgres (``CampaignQueue/foldState(campaign:)``).
public struct QueueFoldState: Hashable, Sendable {
    /// Every fence of this queue is at or above it; a lease below it was of a queue Redis lost.
    public var fenceBase: Int
    /// The number of the last snapshot taken.
    public var fold: Int
    /// The number of the last snapshot Postgres holds.
    public var folded: Int
}

/// What ``CampaignQueue/countLostRun(_:reached:)`` did.
public enum LostRunCount: Hashable, Sendable {
    /// This many re-sends were counted (0: the rebuild or earlier reports had counted them all).
    case counted(Int)
    /// The campaign has no queue: not rebuilt yet, or over and removed.
    case queueMissing
    /// The run's lease was of the queue Redis holds now: it lost a lease, not the queue.
    case sameQueue
}

extension RedisConnection {
    /// Decodes a hash of shard id → integer (cursors, `sent` marks) as `HGETALL` returns it.
    func shardMarks(_ reply: RedisReply, _ what: String) throws(RedisError) -> [Int: Int] {
        var marks: [Int: Int] = [:]
        for (shard, value) in try self.fieldMap(reply, what) {
            guard let shard = Int(shard), let mark = Int(String(decoding: value, as: UTF8.self)) else { throw self.unexpected(what, reply) }
            marks[shard] = mark
        }
        return marks
    }

    /// Decodes a `pf:{C}:stats` hash as `HGETALL` returns it; `what` names the reply in errors.
    func counters(_ reply: RedisReply, _ what: String) throws(RedisError) -> CampaignCounters {
        var counters = CampaignCounters()
        for (name, value) in try self.fieldMap(reply, what) {
            guard let number = Int(String(decoding: value, as: UTF8.self)) else { throw self.unexpected("\(what), field \(name)", reply) }
            counters.set(name, number)
        }
        return counters
    }
}

extension CampaignCounters {
    /// Sets the counter a `pf:{C}:stats` field names; other fields are ignored.
    mutating func set(_ field: String, _ value: Int) {
        switch field {
        case "accepted": self.accepted = value
        case "resent": self.resent = value
        case "retried": self.retried = value
        case "done_shards": self.doneShards = value
        case _ where field.hasPrefix("rejected:"): self.rejected[String(field.dropFirst("rejected:".count))] = value
        default: break
        }
    }

    /// The `pf:{C}:stats` field/value pairs that hold these counters.
    var fields: [[UInt8]] {
        var pairs: [(String, Int)] = [("accepted", self.accepted), ("resent", self.resent), ("retried", self.retried), ("done_shards", self.doneShards)]
        pairs += self.rejected.sorted { $0.key < $1.key }.map { ("rejected:\($0.key)", $0.value) }
        return pairs.flatMap { [Array($0.0.utf8), $0.1.redisArgument] }
    }
}
