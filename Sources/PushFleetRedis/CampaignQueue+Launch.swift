public import Foundation
public import PushFleetCore

// MARK: - Launch: stage, publish, discard

extension CampaignQueue {
    /// Writes one shard's tokens (raw bytes), replacing any earlier list: `DEL` + `RPUSH`, pipelined.
    ///
    /// Stage every shard before ``publish(_:)``: workers may claim as soon as it returns.
    /// - Parameter tokens: The shard's tokens in sending order; about 1,000 per shard is typical.
    public func stageShard(campaign: UUID, shard: Int, tokens: [DeviceToken]) async throws {
        try await self.stageShards(campaign: campaign, shards: [(shard: shard, tokens: tokens)])
    }

    /// Writes many shards in one pipeline; see ``stageShard(campaign:shard:tokens:)``. With
    /// `launch`, into that launch's own staging lists, which ``publish(_:launch:)`` renames into
    /// place; a staged list expires after ``stagedLifetimeSeconds`` unless it is published, so a
    /// launch killed while staging leaves nothing behind for long. Keep one call to some tens of
    /// thousands of tokens: the pipeline is built in memory.
    ///
    /// A personalized campaign's shards come with `values`: per shard, per token, the recipient's
    /// packed values (``PayloadTemplate/pack(_:)``), kept in the token's list entry
    /// (``ShardEntry``); read them back with ``read(_:from:count:clock:personalized:)``.
    public func stageShards(
        campaign: UUID, launch: String? = nil, shards: [(shard: Int, tokens: [DeviceToken])], values: [RecipientValueList]? = nil
    ) async throws {
        let commands = Self.stagingCommands(campaign: campaign, launch: launch, shards: shards, values: values)
        try await self.client.withConnection { [commands] connection in
            _ = try connection.checkedPipeline(commands)
        }
    }

    /// The commands of ``stageShards(campaign:launch:shards:values:)``, written as they go to
    /// Redis: no array per token.
    private static func stagingCommands(
        campaign: UUID, launch: String?, shards: [(shard: Int, tokens: [DeviceToken])], values: [RecipientValueList]?
    ) -> RedisCommands {
        precondition(values.map { $0.count == shards.count && zip($0, shards).allSatisfy { $0.count == $1.tokens.count } } ?? true)
        let keys = CampaignKeys(campaign)
        var commands = RedisCommands()
        // Each entry is its length and `\r\n` twice (under 16 bytes), the token and its values.
        let tokens = shards.reduce(0) { $0 + $1.tokens.count }
        commands.reserveCapacity(tokens * 48 + (values?.reduce(0) { $0 + $1.bytes.count } ?? 0) + shards.count * 160)
        for (offset, (shard, tokens)) in shards.enumerated() {
            let key = launch.map { keys.staged(shard, launch: $0) } ?? keys.shard(shard)
            commands.append([Array("DEL".utf8), key])
            var valuesAt = 0
            for start in stride(from: 0, to: tokens.count, by: Self.batchSize) {
                let end = min(start + Self.batchSize, tokens.count)
                commands.begin(argumentCount: 2 + end - start)
                commands.appendArgument(Array("RPUSH".utf8))
                commands.appendArgument(key)
                if let values = values?[offset] {
                    values.bytes.withUnsafeBytes { packed in
                        for token in tokens[start..<end] {
                            let (mine, next) = values.values(at: valuesAt)
                            valuesAt = next
                            commands.appendArgument(byteCount: ShardEntry.byteCount(token, valueCount: mine.count)) {
                                ShardEntry.append(token, values: UnsafeRawBufferPointer(rebasing: packed[mine]), to: &$0)
                            }
                        }
                    }
                } else {
                    for token in tokens[start..<end] { commands.appendArgument(byteCount: token.count) { token.appendBytes(to: &$0) } }
                }
            }
            if launch != nil { commands.append(RedisCommand.arguments("EXPIRE", key, Self.stagedLifetimeSeconds)) }
        }
        return commands
    }

    /// Makes a staged campaign claimable: writes `pf:{C}:meta`, fills pending with `0..<shardCount`,
    /// and adds the id to `pf:active:<topic>:<environment>`.
    ///
    /// Idempotent: when the campaign was already published, its meta hash and pending list are left
    /// as they are (a paused campaign stays paused) and only the active-set entry is ensured.
    public func publish(_ descriptor: CampaignDescriptor) async throws {
        let keys = CampaignKeys(descriptor.id)
        let arguments = [descriptor.shardCount.redisArgument] + descriptor.metaFields
        try await self.client.withConnection { connection in
            _ = try connection.checkedEvaluate(
                "publish", CampaignScripts.publish, keys: [keys.meta, keys.pending], arguments: arguments
            )
            // Only after the campaign is complete in Redis may workers find it.
            try CampaignQueue.activate(descriptor, on: connection)
        }
    }

    /// Publishes the shards `launch` staged (``stageShards(campaign:launch:shards:)``), in one
    /// atomic step: the staged lists are renamed into place, the meta hash written and pending
    /// filled, unless the campaign is published already; then the id joins the active set.
    /// - Returns: true if this launch published it; false if it was published already (by another
    ///   launch of the same id; the campaign may have finished since and its queue been removed),
    ///   in which case nothing of this launch was used: discard it with
    ///   ``discardStaged(campaign:launch:shardCount:)``.
    /// - Throws: ``RedisError`` if a staged list is missing (nothing is changed then).
    @discardableResult
    public func publish(_ descriptor: CampaignDescriptor, launch: String) async throws -> Bool {
        try await self.client.withConnection { connection in
            let (keys, arguments) = Self.publishing(descriptor, launch: launch)
            let reply = try connection.evaluate(CampaignScripts.publishStaged, keys: keys, arguments: arguments)
            return try Self.published(descriptor, launch: launch, reply: reply, on: connection)
        }
    }

    /// ``stageShards(campaign:launch:shards:values:)`` and ``publish(_:launch:)`` in one round
    /// trip (Redis runs a pipeline in order, so the script finds the lists staged before it): for
    /// a notification, whose shards are all in hand when it is recorded.
    /// - Returns: as ``publish(_:launch:)``.
    /// - Throws: ``RedisError`` as both do; whether the campaign was published is then unknown.
    @discardableResult
    public func stageAndPublish(_ descriptor: CampaignDescriptor, launch: String, shards: [(shard: Int, tokens: [DeviceToken])]) async throws -> Bool {
        precondition(shards.map(\.shard) == Array(0..<descriptor.shardCount), "every shard of the campaign, in order")
        // One RPUSH a list: a list exists only if all of it was written, so a failed write leaves
        // one missing, and the script then publishes nothing.
        precondition(shards.allSatisfy { $0.tokens.count <= Self.batchSize }, "shards of at most \(Self.batchSize) tokens")
        var commands = Self.stagingCommands(campaign: descriptor.id, launch: launch, shards: shards, values: nil)
        let (keys, arguments) = Self.publishing(descriptor, launch: launch)
        commands.append(RedisConnection.evaluateCommand(CampaignScripts.publishStaged, keys: keys, arguments: arguments))
        return try await self.client.withConnection { [commands] connection in
            let replies = try connection.pipeline(commands)
            var reply = replies[replies.count - 1]
            if RedisConnection.isNoScript(reply) {
                reply = try connection.evaluate(CampaignScripts.publishStaged, keys: keys, arguments: arguments)
            }
            do {
                return try Self.published(descriptor, launch: launch, reply: reply, on: connection)
            } catch {
                // A list missing: the staging write Redis refused says why.
                for (index, reply) in replies.enumerated().dropLast() {
                    if case .error(let message) = reply {
                        throw RedisError.errorReply(connection.lastServer, command: commands.name(of: index), message)
                    }
                }
                throw error
            }
        }
    }

    /// The keys and arguments of the publishStaged script.
    private static func publishing(_ descriptor: CampaignDescriptor, launch: String) -> (keys: [[UInt8]], arguments: [[UInt8]]) {
        let keys = CampaignKeys(descriptor.id)
        let shards = 0..<descriptor.shardCount
        return (
            [keys.meta, keys.pending] + shards.map { keys.staged($0, launch: launch) } + shards.map { keys.shard($0) } + [keys.removed],
            [descriptor.shardCount.redisArgument] + descriptor.metaFields + [Array("launch".utf8), Array(launch.utf8)]
        )
    }

    /// What the publishStaged script's reply says, once the campaign is in its active set.
    private static func published(_ descriptor: CampaignDescriptor, launch: String, reply: RedisReply, on connection: RedisConnection) throws(RedisError) -> Bool {
        if case .error(let message) = reply { throw RedisError.errorReply(connection.lastServer, command: "the publishStaged script", message) }
        let outcome = try connection.integer(reply, "the publishStaged script")
        if outcome < 0 {
            throw RedisError(
                code: .unexpectedReply,
                message: "launch \(launch) of campaign \(descriptor.id.uuidString.lowercased()) at \(connection.lastServer) "
                    + "has a staged shard missing; nothing was published"
            )
        }
        // Finished, its queue removed: nothing to make claimable.
        if outcome == 2 { return false }
        // Ensured either way: a launch that died between the two steps left it out.
        try CampaignQueue.activate(descriptor, on: connection)
        return outcome == 1
    }

    /// The launch whose staged shards became the campaign (``publish(_:launch:)``), or nil when the
    /// campaign is not in Redis or was published without one.
    public func launchID(campaign: UUID) async throws -> String? {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            try connection.checkedCommand(RedisCommand.arguments("HGET", keys.meta, "launch")).string
        }
    }

    /// Deletes the shard lists `launch` staged (`0..<shardCount`); touches nothing else.
    public func discardStaged(campaign: UUID, launch: String, shardCount: Int) async throws {
        let keys = CampaignKeys(campaign)
        let staged = (0..<max(0, shardCount)).map { keys.staged($0, launch: launch) }
        try await self.client.withConnection { connection in try CampaignQueue.delete(staged, on: connection) }
    }

    /// Deletes everything launch wrote for a campaign that will not run (a failed or abandoned
    /// launch): every key, shard lists `0..<shardCount`, and its active-set entry if it was published.
    public func discard(campaign: UUID, shardCount: Int) async throws {
        let keys = CampaignKeys(campaign)
        try await self.client.withConnection { connection in
            let reply = try connection.checkedCommand(RedisCommand.arguments("HMGET", keys.meta, "topic", "environment", "kind"))
            try CampaignQueue.deleteAll(keys, shardCount: shardCount, on: connection)
            if let parts = reply.array, parts.count == 3, let topic = parts[0].string, let environment = parts[1].string.flatMap(APNsEnvironment.init(rawValue:)) {
                let kind = parts[2].string.flatMap(CampaignKind.init(rawValue:)) ?? .campaign
                let active = CampaignKeys.active(topic: topic, environment: environment, kind: kind)
                _ = try connection.checkedCommand(RedisCommand.arguments("SREM", active, campaign.uuidString.lowercased()))
            }
        }
    }

    /// The published descriptor, or nil when the campaign is not in Redis.
    /// - Throws: ``RedisError/Code/unexpectedReply`` when the meta hash lacks a field or has a malformed one.
    public func descriptor(campaign: UUID) async throws -> CampaignDescriptor? {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection -> CampaignDescriptor? in
            try Self.descriptor(try connection.checkedCommand([Array("HGETALL".utf8), keys.meta]), campaign: campaign, on: connection)
        }
    }

    /// The descriptor of an `HGETALL` of the meta hash, nil when it is empty.
    static func descriptor(_ reply: RedisReply, campaign: UUID, on connection: RedisConnection) throws(RedisError) -> CampaignDescriptor? {
        if case .error(let message) = reply { throw RedisError.errorReply(connection.lastServer, command: "HGETALL", message) }
        let fields = try connection.fieldMap(reply, "HGETALL meta")
        if fields.isEmpty { return nil }
        do throws(CampaignDescriptor.FieldError) {
            return try CampaignDescriptor(metaFields: fields)
        } catch {
            throw RedisError(
                code: .unexpectedReply,
                message: "the campaign \(campaign.uuidString.lowercased()) in Redis at \(connection.lastServer) has a missing or "
                    + "malformed meta field '\(error.name)'"
            )
        }
    }

    /// The ids in the active set of `kind` (`pf:active:<topic>:<environment>` for campaigns,
    /// `pf:now:<topic>:<environment>` for notifications), in no particular order.
    public func activeCampaigns(topic: String, environment: APNsEnvironment, kind: CampaignKind = .campaign) async throws -> [UUID] {
        let active = CampaignKeys.active(topic: topic, environment: environment, kind: kind)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedCommand([Array("SMEMBERS".utf8), active])
            guard let members = reply.array else { throw connection.unexpected("SMEMBERS", reply) }
            return members.compactMap { $0.string.flatMap(UUID.init(uuidString:)) }
        }
    }

    /// Pauses a running campaign on a worker's word, with the reason for the coordinator to record;
    /// `outage` when APNs itself failed (5xx, 429 past the retries) rather than the provider's
    /// credentials or topic, so that the coordinator resumes it later by itself.
    /// - Returns: whether it was running.
    @discardableResult
    public func requestPause(campaign: UUID, reason: String, outage: Bool = false) async throws -> Bool {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedEvaluate(
                "requestPause", CampaignScripts.requestPause, keys: [keys.meta], arguments: [Array(reason.utf8), Array((outage ? "1" : "0").utf8)]
            )
            return try connection.integer(reply, "the requestPause script") == 1
        }
    }

    /// A worker's pause request not yet recorded by the coordinator.
    public func pauseRequest(campaign: UUID) async throws -> PauseRequest? {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedCommand(RedisCommand.arguments("HMGET", keys.meta, "pause_reason", "pause_outage"))
            guard case .array(let fields) = reply, fields.count == 2, let reason = fields[0].string else { return nil }
            return PauseRequest(reason: reason, isOutage: fields[1].string == "1")
        }
    }

    /// Forgets a pause request the coordinator has recorded.
    public func clearPauseRequest(campaign: UUID) async throws {
        let keys = CampaignKeys(campaign)
        try await self.client.withConnection { connection in
            _ = try connection.checkedCommand(RedisCommand.arguments("HDEL", keys.meta, "pause_reason", "pause_outage"))
        }
    }

    /// Adds the campaign to the active set of `kind`, where workers look for work; idempotent.
    public func ensureActive(campaign: UUID, topic: String, environment: APNsEnvironment, kind: CampaignKind = .campaign) async throws {
        try await self.client.withConnection { connection in
            try CampaignQueue.activate(campaign, topic: topic, environment: environment, kind: kind, on: connection)
        }
    }

    /// What a wait for a notification ended with.
    public enum NotificationWake: Sendable, Hashable {
        /// Nothing was published within the wait.
        case timedOut
        /// A notification was published: this one (nil if the wake-up's entry names none).
        case published(UUID?)
    }

    /// Waits up to `timeout` (whole seconds, at least 1) for a notification of this topic and
    /// environment to be published. Each publication wakes one waiter, which learns its id.
    ///
    /// Blocks this client's connection for as long as it waits: call it on a client of its own.
    public func waitForNotification(topic: String, environment: APNsEnvironment, timeout: Duration) async throws -> NotificationWake {
        let key = CampaignKeys.wake(topic: topic, environment: environment)
        let seconds = max(1, Int(timeout.components.seconds))
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedCommand(RedisCommand.arguments("BLPOP", key, seconds))
            guard let popped = reply.array else { return .timedOut }
            // [key, id]
            return .published(popped.count == 2 ? popped[1].string.flatMap(UUID.init(uuidString:)) : nil)
        }
    }

    /// Sets the status workers see at their next claim or checkpoint. Does nothing when the campaign
    /// is not published (it never creates a meta hash).
    public func setStatus(campaign: UUID, _ status: CampaignQueueStatus) async throws {
        try await self.setMeta(campaign: campaign, arguments: [Array(status.rawValue.utf8)])
    }

    /// Sets the status and the rate limit (nil lifts it) in one round trip, as the coordinator
    /// tells Redis what Postgres holds. Does nothing when the campaign is not published.
    public func setStatus(campaign: UUID, _ status: CampaignQueueStatus, rateLimit: Int?) async throws {
        try await self.setMeta(campaign: campaign, arguments: [Array(status.rawValue.utf8), rateLimit?.redisArgument ?? []])
    }

    /// Runs ``CampaignScripts/setStatus`` on the campaign's meta hash.
    func setMeta(campaign: UUID, arguments: [[UInt8]]) async throws {
        let keys = CampaignKeys(campaign)
        try await self.client.withConnection { connection in
            _ = try connection.checkedEvaluate("setStatus", CampaignScripts.setStatus, keys: [keys.meta], arguments: arguments)
        }
    }
}
