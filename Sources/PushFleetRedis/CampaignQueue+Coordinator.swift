public import Foundation
public import PushFleetCore

// MARK: - Coordinator: counters, events, reaping, removal

extension CampaignQueue {
    /// The campaign's totals from `pf:{C}:stats` (all zero when it has none yet).
    public func counters(campaign: UUID) async throws -> CampaignCounters {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            try connection.counters(try connection.checkedCommand([Array("HGETALL".utf8), keys.stats]), "HGETALL stats")
        }
    }

    /// Up to `count` events with ids after `id`, oldest first, with their stream ids.
    /// - Parameter id: The last id already applied, exclusive; `"0-0"` reads from the beginning.
    /// - Throws: ``RedisError/Code/unexpectedReply`` for an entry PushFleet did not write.
    public func events(campaign: UUID, after id: String, count: Int) async throws -> [(id: String, event: QueueEvent)] {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection -> [(id: String, event: QueueEvent)] in
            let reply = try connection.checkedCommand(RedisCommand.arguments("XRANGE", keys.events, "(" + id, "+", "COUNT", count))
            guard let entries = reply.array else { throw connection.unexpected("XRANGE", reply) }
            return try entries.map { entry throws(RedisError) in
                guard let parts = entry.array, parts.count == 2, let entryID = parts[0].string else {
                    throw connection.unexpected("XRANGE", entry)
                }
                let fields = try connection.fieldMap(parts[1], "XRANGE")
                guard let event = Self.event(fields) else { throw connection.unexpected("XRANGE (event \(entryID))", entry) }
                return (id: entryID, event: event)
            }
        }
    }

    /// Deletes events up to and including `id` (`XTRIM MINID` of the next id); later ones stay.
    public func trimEvents(campaign: UUID, through id: String) async throws {
        let keys = CampaignKeys(campaign)
        let parts = id.split(separator: "-")
        guard parts.count == 2, let milliseconds = UInt64(parts[0]), let sequence = UInt64(parts[1]) else {
            throw RedisError(code: .unexpectedReply, message: "'\(id)' is not a stream id (milliseconds-sequence)")
        }
        let next = sequence == .max ? "\(milliseconds + 1)-0" : "\(milliseconds)-\(sequence + 1)"
        try await self.client.withConnection { connection in
            _ = try connection.checkedCommand(RedisCommand.arguments("XTRIM", keys.events, "MINID", next))
        }
    }

    /// Ends expired leases: their owners are dropped (a late checkpoint by the old holder then
    /// fails), and their shards go to the front of pending, or to `pf:{C}:dead` once the shard has
    /// lost `maximumAttempts` holders. At most ``reapLimit`` per call.
    /// - Returns: How many leases were reaped.
    public func reapExpiredLeases(campaign: UUID, maximumAttempts: Int) async throws -> Int {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedEvaluate(
                "reap", CampaignScripts.reap, keys: [keys.leases, keys.owner, keys.pending, keys.attempts, keys.dead],
                arguments: [maximumAttempts.redisArgument, Self.reapLimit.redisArgument]
            )
            return try connection.integer(reply, "the reap script")
        }
    }

    /// How many shards are leased now.
    public func leaseCount(campaign: UUID) async throws -> Int {
        try await self.count("ZCARD", CampaignKeys(campaign).leases)
    }

    /// How many shards wait to be claimed.
    public func pendingCount(campaign: UUID) async throws -> Int {
        try await self.count("LLEN", CampaignKeys(campaign).pending)
    }

    /// Puts the dead shards back to pending with their attempts reset. - Returns: how many.
    public func retryDeadShards(campaign: UUID) async throws -> Int {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedEvaluate(
                "retryDead", CampaignScripts.retryDead, keys: [keys.dead, keys.pending, keys.attempts], arguments: []
            )
            return try connection.integer(reply, "the retryDead script")
        }
    }

    /// The shards given up on after too many attempts, in the order they died.
    public func deadShards(campaign: UUID) async throws -> [Int] {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedCommand(RedisCommand.arguments("LRANGE", keys.dead, 0, -1))
            guard let items = reply.array else { throw connection.unexpected("LRANGE dead", reply) }
            return try items.map { item throws(RedisError) in try connection.integer(item, "LRANGE dead") }
        }
    }

    /// Deletes every key of a finished campaign and removes it from its active set. A campaign
    /// (not a notification: rings come by the second, each would leave a key) keeps a mark for a
    /// week that its queue was removed, so that no rebuild puts it back (``CampaignKeys/removed``).
    public func remove(campaign: UUID, topic: String, environment: APNsEnvironment, kind: CampaignKind = .campaign) async throws {
        let keys = CampaignKeys(campaign)
        let active = CampaignKeys.active(topic: topic, environment: environment, kind: kind)
        try await self.client.withConnection { connection in
            // The mark first: from then on a late restore is refused, before any key goes.
            if kind == .campaign {
                _ = try connection.checkedCommand(RedisCommand.arguments("SET", keys.removed, "1", "EX", Self.removedMarkSeconds))
            }
            // SREM next: workers stop looking before the keys go.
            _ = try connection.checkedCommand(RedisCommand.arguments("SREM", active, campaign.uuidString.lowercased()))
            let reply = try connection.checkedCommand(RedisCommand.arguments("HGET", keys.meta, "shard_count"))
            try CampaignQueue.deleteAll(keys, shardCount: reply.integer, on: connection)
        }
    }

    /// How long the mark of a removed queue lasts: far longer than any freeze a coordinator
    /// lives through with a rebuild under way.
    static let removedMarkSeconds = 7 * 24 * 3600

    func count(_ command: String, _ key: [UInt8]) async throws -> Int {
        try await self.client.withConnection { connection in
            try connection.integer(try connection.checkedCommand([Array(command.utf8), key]), command)
        }
    }

    /// Decodes one stream entry's fields; nil when they are not an event PushFleet writes.
    static func event(_ fields: [String: [UInt8]]) -> QueueEvent? {
        func text(_ name: String) -> String? { fields[name].map { String(decoding: $0, as: UTF8.self) } }
        guard let shard = text("s").flatMap({ Int($0) }) else { return nil }
        switch text("k") {
        case "shard_done":
            return .shardDone(shard: shard)
        case "rejections":
            guard let packed = fields["b"], let rejections = RejectionPack.decode(packed), !rejections.isEmpty else { return nil }
            return .rejected(rejections, shard: shard)
        case "rejected":
            guard let bytes = fields["t"], let token = try? DeviceToken(bytes: bytes), let reason = text("r"),
                let timestamp = text("ts").flatMap({ Int64($0) })
            else { return nil }
            let rejection = Rejection(token: token, reason: RejectionReason(reason), timestampMilliseconds: timestamp == 0 ? nil : timestamp)
            return .rejected([rejection], shard: shard)
        default:
            return nil
        }
    }
}
