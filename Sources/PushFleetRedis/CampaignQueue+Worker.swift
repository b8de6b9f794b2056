public import Foundation
import PushFleetCore

// MARK: - Worker: claim, read, checkpoint, complete, release

extension CampaignQueue {
    /// Leases the first pending shard of a running campaign.
    ///
    /// When the shard comes back from a holder that lost it with tokens read past its cursor, those
    /// (`sent - cursor`) are added to `resent` once: they are about to be sent again.
    /// - Parameters:
    ///   - worker: This worker's name; the lease's owner is `"worker|fence"`.
    ///   - leaseMilliseconds: How long the lease lasts without a checkpoint, by Redis' clock (typically 30,000).
    /// - Returns: The lease, or nil when nothing is pending or the campaign is not `running`.
    public func claim(campaign: UUID, worker: String, leaseMilliseconds: Int) async throws -> ShardLease? {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection -> ShardLease? in
            let reply = try connection.checkedEvaluate(
                "claim", CampaignScripts.claim, keys: Self.claimKeys(keys), arguments: Self.claimArguments(worker, leaseMilliseconds)
            )
            return try Self.lease(reply, campaign: campaign, worker: worker, length: nil, on: connection)
        }
    }

    /// ``claim(campaign:worker:leaseMilliseconds:)`` for a worker that has not read the campaign's
    /// descriptor yet, such as a notification just published: the descriptor, the claim and the
    /// length of shard 0 (a ring's first and, up to 1,000 devices, only shard) in one round trip.
    /// A claim of another shard reads its length after.
    /// - Returns: The descriptor (nil when the campaign is not in Redis) and the lease (nil when
    ///   nothing was claimed). A caller that cannot send the campaign releases the lease.
    /// - Throws: ``RedisError`` when the meta hash cannot be read, after releasing what was claimed.
    public func claimReadingDescriptor(
        campaign: UUID, worker: String, leaseMilliseconds: Int
    ) async throws -> (descriptor: CampaignDescriptor?, lease: ShardLease?) {
        let keys = CampaignKeys(campaign)
        return try await self.client.withConnection { connection in
            let (claimKeys, arguments) = (Self.claimKeys(keys), Self.claimArguments(worker, leaseMilliseconds))
            let replies = try connection.pipeline([
                [Array("HGETALL".utf8), keys.meta],
                RedisConnection.evaluateCommand(CampaignScripts.claim, keys: claimKeys, arguments: arguments),
                // After the claim: a list this worker now holds does not change.
                [Array("LLEN".utf8), keys.shard(0)],
            ])
            var claim = replies[1]
            var lengthOfShard0 = replies[2].integer
            if RedisConnection.isNoScript(claim) {
                claim = try connection.evaluate(CampaignScripts.claim, keys: claimKeys, arguments: arguments)
                lengthOfShard0 = nil
            }
            if case .error(let message) = claim { throw RedisError.errorReply(connection.lastServer, command: "the claim script", message) }
            let lease = try Self.lease(claim, campaign: campaign, worker: worker, length: lengthOfShard0, on: connection)
            do {
                return (try Self.descriptor(replies[0], campaign: campaign, on: connection), lease)
            } catch {
                // Claimed before the descriptor was known to be readable: the shard goes back, unsent.
                if let lease { _ = try? Self.release(lease, cursor: lease.cursor, delivered: lease.delivered, countAttempt: false, on: connection) }
                throw error
            }
        }
    }

    private static func claimKeys(_ keys: CampaignKeys) -> [[UInt8]] {
        [keys.meta, keys.pending, keys.leases, keys.owner, keys.fence, keys.cursor, keys.sent, keys.attempts, keys.stats, keys.delivered]
    }

    private static func claimArguments(_ worker: String, _ leaseMilliseconds: Int) -> [[UInt8]] {
        [Array(worker.utf8), leaseMilliseconds.redisArgument]
    }

    /// The lease of the claim script's reply (nil when it claimed nothing), with the shard's length:
    /// `lengthOfShard0` if the shard is 0 and it was read after the claim, else read now.
    private static func lease(
        _ reply: RedisReply, campaign: UUID, worker: String, length lengthOfShard0: Int?, on connection: RedisConnection
    ) throws(RedisError) -> ShardLease? {
        if reply.isNull { return nil }
        guard let parts = reply.array, parts.count == 5, let shard = parts[0].integer, let fence = parts[1].integer,
            let cursor = parts[2].integer, let attempts = parts[3].integer, let packed = parts[4].bytes
        else { throw connection.unexpected("the claim script", reply) }
        // A list PushFleet did not write leaves nothing delivered: the shard is sent in full, never
        // stranded with its lease taken.
        let delivered = DeliveredPositions.decode(packed) ?? []
        // The list is immutable while we hold the lease, so its length needs no atomicity.
        let length: Int
        if shard == 0, let lengthOfShard0 {
            length = lengthOfShard0
        } else {
            let reply = try connection.checkedCommand([Array("LLEN".utf8), CampaignKeys(campaign).shard(shard)])
            length = try connection.integer(reply, "LLEN")
        }
        return ShardLease(
            campaign: campaign, shard: shard, owner: "\(worker)|\(fence)", fence: fence, cursor: cursor, attempts: attempts, tokenCount: length,
            delivered: delivered.filter { $0 >= cursor && $0 < length }
        )
    }

    /// Reads up to `count` tokens of a held shard from `index`, raising the shard's `sent` mark to
    /// the end of what was returned (tokens read count as handed to a sender). A throttled
    /// campaign's read is paced by the fleet's token bucket (see ``CampaignScripts/read``): it may
    /// get fewer tokens, or none and how long to wait.
    /// - Parameters:
    ///   - index: The first index to read, from 0.
    ///   - count: How many tokens at most; the worker's read window (e.g. 100).
    ///   - clock: The time in milliseconds the bucket is filled to; nil (always, but in tests of
    ///     the bucket) takes Redis' own clock.
    /// - Returns: The window (no tokens past the end, or when `count` < 1), or nil when the lease was lost.
    ///   - personalized: Whether the campaign's entries carry values (``ShardEntry``); they are
    ///     then in the window's ``ShardWindow/values``.
    public func read(_ lease: ShardLease, from index: Int, count: Int, clock: Int? = nil, personalized: Bool = false) async throws -> ShardWindow? {
        let keys = CampaignKeys(lease.campaign)
        return try await self.client.withConnection { connection -> ShardWindow? in
            let reply = try connection.checkedEvaluate(
                "read", CampaignScripts.read,
                keys: [keys.owner, keys.sent, keys.shard(lease.shard), keys.meta, keys.bucket],
                arguments: [
                    lease.shard.redisArgument, Array(lease.owner.utf8), index.redisArgument, count.redisArgument,
                    clock?.redisArgument ?? [],
                ]
            )
            if reply.isNull { return nil }
            if let wait = reply.integer { return ShardWindow(tokens: [], retryAfter: .milliseconds(wait)) }
            guard let items = reply.array else { throw connection.unexpected("the read script", reply) }
            var tokens: [DeviceToken] = []
            tokens.reserveCapacity(items.count)
            guard personalized else {
                for item in items {
                    guard let bytes = item.bytes, let token = try? DeviceToken(bytes: bytes) else {
                        throw connection.unexpected("the read script (shard \(lease.shard))", item)
                    }
                    tokens.append(token)
                }
                return ShardWindow(tokens: tokens, retryAfter: nil)
            }
            var values: [[UInt8]] = []
            values.reserveCapacity(items.count)
            for item in items {
                guard let bytes = item.bytes, let entry = ShardEntry.decode(bytes) else {
                    throw connection.unexpected("the read script (shard \(lease.shard), a personalized entry)", item)
                }
                tokens.append(entry.token)
                values.append(entry.values)
            }
            return ShardWindow(tokens: tokens, values: values, retryAfter: nil)
        }
    }

    /// Sets how many notifications a second the fleet sends of the campaign (nil: as fast as it
    /// can); the next read of any worker is paced by it. Does nothing when the campaign is not
    /// published.
    public func setRateLimit(campaign: UUID, _ rate: Int?) async throws {
        try await self.setMeta(campaign: campaign, arguments: [[], rate?.redisArgument ?? []])
    }

    /// Records outcomes of a held shard and extends its lease. With zero deltas and no rejections it
    /// is the heartbeat; call it at least every third of the lease.
    ///
    /// Cheap: one script call, one `HINCRBY` per delta and per rejection reason, and one stream
    /// entry holding all the rejections (``RejectionPack``). Safe to repeat: a checkpoint sent again with the same
    /// ``CheckpointDelta/sequence`` after an unanswered call is applied once.
    /// - Parameters:
    ///   - delta: What happened since the holder's previous checkpoint.
    ///   - leaseMilliseconds: The new lease length from now, by Redis' clock.
    /// - Returns: `.ok` with the campaign's status (pause or cancel reaches workers here), or `.leaseLost`.
    public func checkpoint(_ lease: ShardLease, _ delta: CheckpointDelta, leaseMilliseconds: Int) async throws -> CheckpointResult {
        let keys = CampaignKeys(lease.campaign)
        var arguments: [[UInt8]] = [
            lease.shard.redisArgument, Array(lease.owner.utf8), delta.cursor.redisArgument, delta.accepted.redisArgument,
            delta.resent.redisArgument, delta.retried.redisArgument, leaseMilliseconds.redisArgument, delta.sequence.redisArgument,
        ]
        if delta.rejections.isEmpty {
            arguments.append([])
        } else {
            arguments.append(RejectionPack.encode(delta.rejections))
            for (reason, count) in RejectionPack.counts(delta.rejections) {
                arguments.append(Array(reason.utf8))
                arguments.append(count.redisArgument)
            }
        }
        return try await self.client.withConnection { [arguments] connection -> CheckpointResult in
            let reply = try connection.checkedEvaluate(
                "checkpoint", CampaignScripts.checkpoint,
                keys: [keys.owner, keys.cursor, keys.leases, keys.stats, keys.events, keys.meta, keys.checkpoints], arguments: arguments
            )
            if reply == .integer(0) { return .leaseLost }
            guard let text = reply.string, let status = CampaignQueueStatus(rawValue: text) else {
                throw connection.unexpected("the checkpoint script", reply)
            }
            return .ok(status)
        }
    }

    /// Finishes a held shard whose every token has an outcome: deletes its list and bookkeeping,
    /// counts it in `done_shards` and adds a `shard_done` event.
    /// - Returns: false when the lease was lost (nothing changed).
    public func complete(_ lease: ShardLease) async throws -> Bool {
        let keys = CampaignKeys(lease.campaign)
        return try await self.client.withConnection { connection in
            let reply = try connection.checkedEvaluate(
                "complete", CampaignScripts.complete,
                keys: [
                    keys.owner, keys.cursor, keys.leases, keys.sent, keys.stats, keys.events, keys.shard(lease.shard), keys.checkpoints,
                    keys.delivered,
                ],
                arguments: [lease.shard.redisArgument, Array(lease.owner.utf8)]
            )
            return try connection.integer(reply, "the complete script") == 1
        }
    }

    /// Gives a held shard back to the front of pending; the next holder resumes at `cursor`.
    ///
    /// The shard's `sent` mark is lowered to the cursor, so the next claim counts no re-sends: a live
    /// worker knows which tokens at or past `cursor` it really wrote, and reports them as `resent`
    /// in a checkpoint before releasing if they may have been delivered.
    /// - Parameters:
    ///   - cursor: The first index without an outcome. Never lowers the stored cursor.
    ///   - delivered: The positions past `cursor` APNs accepted, ascending: the next holder counts
    ///     them without sending them again. They replace what the shard carried.
    ///   - countAttempt: Whether this counts as a failed attempt (true after errors; false on a graceful drain).
    /// - Returns: false when the lease was lost (nothing changed).
    public func release(_ lease: ShardLease, cursor: Int, delivered: [Int], countAttempt: Bool) async throws -> Bool {
        try await self.client.withConnection { connection in
            try Self.release(lease, cursor: cursor, delivered: delivered, countAttempt: countAttempt, on: connection)
        }
    }

    /// Gives a held shard back with nothing learned: the positions it came with as delivered stay so.
    public func release(_ lease: ShardLease, cursor: Int, countAttempt: Bool) async throws -> Bool {
        try await self.release(lease, cursor: cursor, delivered: lease.delivered.filter { $0 >= cursor }, countAttempt: countAttempt)
    }

    private static func release(
        _ lease: ShardLease, cursor: Int, delivered: [Int], countAttempt: Bool, on connection: RedisConnection
    ) throws(RedisError) -> Bool {
        let keys = CampaignKeys(lease.campaign)
        let reply = try connection.checkedEvaluate(
            "release", CampaignScripts.release,
            keys: [keys.owner, keys.cursor, keys.leases, keys.pending, keys.attempts, keys.sent, keys.delivered],
            arguments: [
                lease.shard.redisArgument, Array(lease.owner.utf8), cursor.redisArgument, (countAttempt ? 1 : 0).redisArgument,
                DeliveredPositions.encode(delivered),
            ]
        )
        return try connection.integer(reply, "the release script") == 1
    }
}
