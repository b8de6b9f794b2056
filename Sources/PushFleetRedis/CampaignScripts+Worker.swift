extension CampaignScripts {
    /// Leases the first pending shard of a running campaign. When the shard comes back with tokens
    /// handed to a sender past its cursor (a dead holder's unconfirmed window), counts them as
    /// `resent` and lowers `sent` to the cursor, so they are counted once; positions among them
    /// that an earlier holder left as delivered are not sent again, and not counted.
    ///
    /// KEYS: 1 meta, 2 pending, 3 leases, 4 owner, 5 fence, 6 cursor, 7 sent, 8 attempts, 9 stats,
    /// 10 delivered.
    /// ARGV: 1 worker, 2 lease_ms.
    /// Returns nil (not running, or nothing pending) or {shard, fence, cursor, attempts, delivered}
    /// (``DeliveredPositions``, '' when none).
    static let claim = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return false end
        local sid = redis.call('LPOP', KEYS[2])
        if not sid then return false end
        \(now)
        local fence = redis.call('INCR', KEYS[5])
        redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), sid)
        redis.call('HSET', KEYS[4], sid, ARGV[1] .. '|' .. fence)
        local cursor = tonumber(redis.call('HGET', KEYS[6], sid) or '0')
        local sent = tonumber(redis.call('HGET', KEYS[7], sid) or '0')
        local delivered = redis.call('HGET', KEYS[10], sid) or ''
        if sent > cursor then
          local resent = sent - cursor
          for p in string.gmatch(delivered, '%d+') do
            p = tonumber(p)
            if p >= cursor and p < sent then resent = resent - 1 end
          end
          if resent > 0 then redis.call('HINCRBY', KEYS[9], 'resent', resent) end
          redis.call('HSET', KEYS[7], sid, cursor)
        end
        return {tonumber(sid), fence, cursor, tonumber(redis.call('HGET', KEYS[8], sid) or '0'), delivered}
        """
    )

    /// Reads a window of a held shard and raises `sent` to its end.
    ///
    /// A throttled campaign (a `rate` in its meta hash) is paced here, by a token bucket the whole
    /// fleet shares: it fills at `rate` permits a second, and a read takes a permit per token. A
    /// read is granted once the bucket holds `min(count, burst)` permits, a burst being a tenth of
    /// a second's worth (at least 1), and then gets as many tokens as the bucket holds, up to
    /// `count`; before that it gets the milliseconds to wait. The bucket holds two bursts at most,
    /// so readers that wake a little late lose nothing, and one idle for long gets no flood. Nothing
    /// is reserved, so a worker that dies holds no share of the rate. The clock is Redis' own
    /// `TIME`, the same for every worker.
    ///
    /// KEYS: 1 owner, 2 sent, 3 shard list, 4 meta, 5 bucket.
    /// ARGV: 1 shard, 2 worker|fence, 3 start index, 4 count, 5 the time in milliseconds ('' for
    /// Redis' clock; a test's clock otherwise).
    /// Returns nil (lease lost), the milliseconds to wait (an integer), or the tokens (empty past
    /// the end, or for a negative start or count < 1).
    static let read = RedisScript(
        """
        if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return false end
        local start, count = tonumber(ARGV[3]), tonumber(ARGV[4])
        if start < 0 or count <= 0 then return {} end
        local rate = tonumber(redis.call('HGET', KEYS[4], 'rate') or '0') or 0
        if rate > 0 then
          local now = tonumber(ARGV[5])
          if not now then
            local t = redis.call('TIME')
            now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
          end
          local burst = math.max(1, math.ceil(rate / 10))
          local bucket = redis.call('HMGET', KEYS[5], 'level', 'at')
          local level, at = tonumber(bucket[1]), tonumber(bucket[2])
          if not level or not at then level, at = 2 * burst, now end
          if now > at then level, at = level + (now - at) * rate / 1000, now end
          level = math.min(2 * burst, level)
          local need = math.min(count, burst)
          if level < need then return math.max(1, math.ceil((need - level) * 1000 / rate)) end
          count = math.min(count, math.floor(level))
          redis.call('HSET', KEYS[5], 'level', string.format('%.17g', level - count), 'at', at)
          redis.call('PEXPIRE', KEYS[5], 60000)
        end
        local items = redis.call('LRANGE', KEYS[3], start, start + count - 1)
        local reached = start + #items
        if reached > tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') then
          redis.call('HSET', KEYS[2], ARGV[1], reached)
        end
        return items
        """
    )

    /// Records outcomes of a held shard and extends its lease; with zero deltas, a heartbeat.
    /// O(reasons): one HINCRBY per reason, and one XADD of the packed rejections.
    ///
    /// Idempotent per holder and sequence number: a worker that saw no answer sends the same
    /// checkpoint again with the same sequence; if it was applied already, the repeat only renews
    /// the lease. Only the holder's highest applied sequence is kept, and a checkpoint numbered at or
    /// below it is never applied, so a late copy of an old call (delivered after a newer one) cannot
    /// count twice either.
    ///
    /// KEYS: 1 owner, 2 cursor, 3 leases, 4 stats, 5 events, 6 meta, 7 checkpoint sequences.
    /// ARGV: 1 shard, 2 worker|fence, 3 cursor, 4 accepted, 5 resent, 6 retried, 7 lease_ms, 8 sequence,
    ///       9 the rejections packed by ``RejectionPack`` ('' when none), then per reason: reason, count.
    /// Returns 0 (lease lost) or the campaign status.
    static let checkpoint = RedisScript(
        """
        if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
        local prefix = ARGV[2] .. '#'
        local seq = tonumber(ARGV[8])
        local last = redis.call('HGET', KEYS[7], ARGV[1])
        local applied = 0
        if last and string.sub(last, 1, #prefix) == prefix then applied = tonumber(string.sub(last, #prefix + 1)) end
        if seq > applied then
          redis.call('HSET', KEYS[7], ARGV[1], prefix .. ARGV[8])
          local cursor = tonumber(ARGV[3])
          if cursor > tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0') then
            redis.call('HSET', KEYS[2], ARGV[1], cursor)
          end
          if ARGV[4] ~= '0' then redis.call('HINCRBY', KEYS[4], 'accepted', ARGV[4]) end
          if ARGV[5] ~= '0' then redis.call('HINCRBY', KEYS[4], 'resent', ARGV[5]) end
          if ARGV[6] ~= '0' then redis.call('HINCRBY', KEYS[4], 'retried', ARGV[6]) end
          if ARGV[9] ~= '' then
            for i = 10, #ARGV, 2 do redis.call('HINCRBY', KEYS[4], 'rejected:' .. ARGV[i], ARGV[i + 1]) end
            redis.call('XADD', KEYS[5], '*', 'k', 'rejections', 's', ARGV[1], 'b', ARGV[9])
          end
        end
        \(now)
        redis.call('ZADD', KEYS[3], now + tonumber(ARGV[7]), ARGV[1])
        return redis.call('HGET', KEYS[6], 'status') or 'cancelled'
        """
    )

    /// Finishes a held shard: its list and bookkeeping go, `done_shards` and an event record it. Its
    /// cursor stays, at the shard's length, so that the coordinator's snapshot of cursors and
    /// counters says which shards the counters have finished.
    ///
    /// KEYS: 1 owner, 2 cursor, 3 leases, 4 sent, 5 stats, 6 events, 7 shard list, 8 checkpoint sequences,
    /// 9 delivered.
    /// ARGV: 1 shard, 2 worker|fence. Returns 1, or 0 when the lease was lost.
    static let complete = RedisScript(
        """
        if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
        redis.call('HDEL', KEYS[1], ARGV[1])
        redis.call('HDEL', KEYS[8], ARGV[1])
        redis.call('HDEL', KEYS[9], ARGV[1])
        redis.call('HSET', KEYS[2], ARGV[1], redis.call('LLEN', KEYS[7]))
        redis.call('ZREM', KEYS[3], ARGV[1])
        redis.call('HDEL', KEYS[4], ARGV[1])
        redis.call('DEL', KEYS[7])
        redis.call('HINCRBY', KEYS[5], 'done_shards', 1)
        redis.call('XADD', KEYS[6], '*', 'k', 'shard_done', 's', ARGV[1])
        return 1
        """
    )

    /// Gives a held shard back, to the front of pending, resuming at the (raised) cursor. `sent` is
    /// lowered to the cursor: the releasing worker is alive and reports its own re-sends. The
    /// positions past the cursor it knows were delivered replace the shard's list of them.
    ///
    /// KEYS: 1 owner, 2 cursor, 3 leases, 4 pending, 5 attempts, 6 sent, 7 delivered.
    /// ARGV: 1 shard, 2 worker|fence, 3 cursor, 4 count_attempt (1 or 0), 5 delivered
    /// (``DeliveredPositions``, '' when none).
    /// Returns 1, or 0 when the lease was lost.
    static let release = RedisScript(
        """
        if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then return 0 end
        local cursor = math.max(tonumber(ARGV[3]), tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0'))
        redis.call('HSET', KEYS[2], ARGV[1], cursor)
        redis.call('HSET', KEYS[6], ARGV[1], cursor)
        redis.call('HDEL', KEYS[1], ARGV[1])
        redis.call('ZREM', KEYS[3], ARGV[1])
        if ARGV[4] == '1' then redis.call('HINCRBY', KEYS[5], ARGV[1], 1) end
        if ARGV[5] == '' then redis.call('HDEL', KEYS[7], ARGV[1]) else redis.call('HSET', KEYS[7], ARGV[1], ARGV[5]) end
        redis.call('LPUSH', KEYS[4], ARGV[1])
        return 1
        """
    )
}
