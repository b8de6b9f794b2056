/// The Lua scripts of ``CampaignQueue``. Each declares every key it touches in `KEYS` (all of one
/// campaign, so one Cluster slot), reads lease time from Redis `TIME`, and stays O(its arguments).
///
/// Fenced scripts first compare `pf:{C}:owner[shard]` with the caller's `worker|fence` and return
/// 0 (or nil) when it differs: a stale worker learns it lost the lease and changes nothing.
enum CampaignScripts {
    /// Makes the list KEYS[1] ARGV[1] elements long (`1` each; only the length means anything),
    /// trimming or appending 1,000 per `RPUSH`.
    static let setListLength = RedisScript(
        """
        local want = tonumber(ARGV[1])
        local have = redis.call('LLEN', KEYS[1])
        if want <= 0 then
            redis.call('DEL', KEYS[1])
            return 0
        end
        if have > want then
            redis.call('LTRIM', KEYS[1], 0, want - 1)
        end
        while have < want do
            local batch = {}
            for i = 1, math.min(1000, want - have) do batch[i] = '1' end
            redis.call('RPUSH', KEYS[1], unpack(batch))
            have = have + #batch
        end
        return want
        """
    )

    /// Sets `now` to Redis' clock in milliseconds.
    static let now = """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
        """

    /// Writes the meta hash (KEYS[1]) from ARGV[2…] and fills pending (KEYS[2]) with the shard ids
    /// `0..<ARGV[1]`, 1,000 per `RPUSH`.
    static let writeMetaAndPending = """
        redis.call('HSET', KEYS[1], unpack(ARGV, 2))
        redis.call('DEL', KEYS[2])
        local batch = {}
        for sid = 0, tonumber(ARGV[1]) - 1 do
          batch[#batch + 1] = sid
          if #batch == 1000 then redis.call('RPUSH', KEYS[2], unpack(batch)); batch = {} end
        end
        if #batch > 0 then redis.call('RPUSH', KEYS[2], unpack(batch)) end
        """

    /// Publishes a campaign staged by one launch, in one step: unless the campaign is published
    /// already, or was and has finished (its queue removed: a second launch of the id, slower than
    /// the whole campaign), renames each staged shard list into place (and keeps it: a staged list
    /// expires), writes the meta hash and fills pending.
    ///
    /// KEYS: 1 meta, 2 pending, then the N staged lists, then the N shard lists, then the removed
    /// mark. ARGV: 1 N, then the meta fields. Returns 1 if published now, 0 if it was published
    /// already, 2 if it has finished (the caller discards its staged lists either way), -1
    /// (nothing changed) if a staged list is missing.
    static let publishStaged = RedisScript(
        """
        if redis.call('EXISTS', KEYS[#KEYS]) == 1 then return 2 end
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        local n = tonumber(ARGV[1])
        for i = 1, n do
          if redis.call('EXISTS', KEYS[2 + i]) == 0 then return -1 end
        end
        for i = 1, n do
          redis.call('RENAME', KEYS[2 + i], KEYS[2 + n + i])
          redis.call('PERSIST', KEYS[2 + n + i])
        end
        \(writeMetaAndPending)
        return 1
        """
    )

    /// Makes the campaign claimable, once.
    ///
    /// KEYS: 1 meta, 2 pending.
    /// ARGV: 1 shard count, 2… field/value pairs of the meta hash.
    /// Returns 1 when published, 0 when the meta hash already existed (nothing changed).
    static let publish = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
        \(writeMetaAndPending)
        return 1
        """
    )

    /// Changes the status, the rate limit or both of a published campaign; never creates the
    /// meta hash.
    ///
    /// KEYS: 1 meta. ARGV: 1 status ('' leaves it), 2 (optional) the rate limit ('' lifts it).
    /// Returns 1, or 0 when the campaign is not published.
    static let setStatus = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        if ARGV[1] ~= '' then
          redis.call('HSET', KEYS[1], 'status', ARGV[1])
          if ARGV[1] == 'running' then redis.call('HDEL', KEYS[1], 'pause_reason', 'pause_outage') end
        end
        if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'rate') elseif ARGV[2] then redis.call('HSET', KEYS[1], 'rate', ARGV[2]) end
        return 1
        """
    )

    /// A worker's request to pause a running campaign over a provider-level error: the status
    /// becomes `paused` at once (every worker stops at its next checkpoint) and the reason waits for
    /// the coordinator, which records it in Postgres. The first reason stays.
    ///
    /// KEYS: 1 meta. ARGV: 1 reason, 2 `1` when APNs itself failed (an outage), else `0`. Returns 1
    /// if the campaign was running, else 0.
    static let requestPause = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
        redis.call('HSET', KEYS[1], 'status', 'paused')
        if redis.call('HSETNX', KEYS[1], 'pause_reason', ARGV[1]) == 1 then
          redis.call('HSET', KEYS[1], 'pause_outage', ARGV[2])
        end
        return 1
        """
    )

    /// Puts every dead shard back at the end of pending with its attempts reset (`campaign retry`);
    /// cursor and sent stay, so each resumes where it stopped.
    ///
    /// KEYS: 1 dead, 2 pending, 3 attempts. Returns how many shards were put back.
    static let retryDead = RedisScript(
        """
        local shards = redis.call('LRANGE', KEYS[1], 0, -1)
        for _, sid in ipairs(shards) do
          redis.call('HDEL', KEYS[3], sid)
          redis.call('RPUSH', KEYS[2], sid)
        end
        redis.call('DEL', KEYS[1])
        return #shards
        """
    )

    /// Returns expired leases' shards to the front of pending, or to the dead list once they have
    /// lost `max_attempts` holders. The owner is dropped; cursor and sent stay for the next holder.
    ///
    /// KEYS: 1 leases, 2 owner, 3 pending, 4 attempts, 5 dead.
    /// ARGV: 1 max_attempts, 2 limit (shards per call).
    /// Returns how many leases were reaped.
    static let reap = RedisScript(
        """
        \(now)
        local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
        for _, sid in ipairs(expired) do
          redis.call('ZREM', KEYS[1], sid)
          redis.call('HDEL', KEYS[2], sid)
          if redis.call('HINCRBY', KEYS[4], sid, 1) >= tonumber(ARGV[1]) then
            redis.call('RPUSH', KEYS[5], sid)
          else
            redis.call('LPUSH', KEYS[3], sid)
          end
        end
        return #expired
        """
    )
}
