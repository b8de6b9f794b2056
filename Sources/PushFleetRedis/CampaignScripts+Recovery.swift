extension CampaignScripts {
    /// The coordinator's view of a campaign, read in one step so that counters and cursors agree:
    /// every outcome the counters hold is below its shard's cursor, and none above.
    ///
    /// Each snapshot raises the meta hash's `fold` number, which only the coordinator does: a queue
    /// whose number is not above the last one folded is an old copy.
    ///
    /// A shard given back with positions delivered above its cursor (`delivered`, see
    /// ``CampaignScripts/release``) counts as handed out up to the last of them: if the queue is
    /// lost, they are sent again from the folded cursor, and were delivered.
    ///
    /// KEYS: 1 meta, 2 stats, 3 cursor, 4 sent, 5 delivered.
    /// Returns nil when the meta hash is missing (the queue is gone), else {stats as HGETALL,
    /// cursor as HGETALL, tokens handed to senders past their shard's cursor, the fold number, the
    /// sent marks as HGETALL would give them}.
    static let snapshot = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return false end
        local fold = redis.call('HINCRBY', KEYS[1], 'fold', 1)
        local sent = redis.call('HGETALL', KEYS[4])
        local ahead = 0
        for i = 1, #sent, 2 do
          local mark = tonumber(sent[i + 1])
          -- The release that left the list wrote the shard's sent mark too.
          local last = tonumber(string.match(redis.call('HGET', KEYS[5], sent[i]) or '', '(%d+)$') or '-1')
          if last >= mark then
            mark = last + 1
            sent[i + 1] = tostring(mark)
          end
          local cursor = tonumber(redis.call('HGET', KEYS[3], sent[i]) or '0')
          if mark > cursor then ahead = ahead + mark - cursor end
        end
        return {redis.call('HGETALL', KEYS[2]), redis.call('HGETALL', KEYS[3]), ahead, fold, sent}
        """
    )

    /// Rebuilds a queue Redis lost from what Postgres kept, in one step: unless the meta hash exists
    /// (the campaign is in Redis after all) or the queue was removed once its campaign finished (a
    /// rebuild of a coordinator frozen past its leadership, continued after the next leader
    /// completed the campaign), renames the staged shard lists into place, and writes
    /// the meta hash, pending, dead, cursors, counters, the rebuilt marks and a fence above any
    /// earlier one.
    ///
    /// KEYS: 1 meta, 2 pending, 3 cursor, 4 stats, 5 fence, 6 dead, 7 sent, 8 attempts, 9 leases,
    ///       10 owner, 11 checkpoint sequences, 12 events, 13 rebuilt, 14 delivered, then the N staged
    ///       lists, then the N shard lists, then the removed mark.
    /// ARGV: 1 N, 2 fence base, then six sections, each a count followed by that many values: meta
    ///       field/value pairs, pending shard ids, dead shard ids, cursor shard/value pairs, stats
    ///       field/value pairs, rebuilt shard/value pairs.
    /// Returns 1 if rebuilt now, 0 if the meta hash or the removed mark exists (nothing changed),
    /// -1 (nothing changed) if a staged list is missing.
    static let restore = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[#KEYS]) == 1 then return 0 end
        local n = tonumber(ARGV[1])
        for i = 1, n do
          if redis.call('EXISTS', KEYS[14 + i]) == 0 then return -1 end
        end
        for k = 2, 14 do redis.call('DEL', KEYS[k]) end
        for i = 1, n do
          redis.call('RENAME', KEYS[14 + i], KEYS[14 + n + i])
          redis.call('PERSIST', KEYS[14 + n + i])
        end
        redis.call('SET', KEYS[5], ARGV[2])
        local at = 3
        local function each(command, key)
          local count = tonumber(ARGV[at])
          local first = at + 1
          at = first + count
          for i = first, first + count - 1, 1000 do
            redis.call(command, key, unpack(ARGV, i, math.min(i + 999, first + count - 1)))
          end
        end
        each('HSET', KEYS[1])
        each('RPUSH', KEYS[2])
        each('RPUSH', KEYS[6])
        each('HSET', KEYS[3])
        each('HSET', KEYS[4])
        each('HSET', KEYS[13])
        return 1
        """
    )

    /// Records that Postgres holds the snapshot numbered `fold`: what the queue did before that
    /// snapshot survives the queue's loss. Never lowers it; never creates the meta hash.
    ///
    /// KEYS: 1 meta. ARGV: 1 the snapshot number. Returns 1, or 0 when the meta hash is missing.
    static let markFolded = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        if tonumber(redis.call('HGET', KEYS[1], 'folded') or '0') < tonumber(ARGV[1]) then
          redis.call('HSET', KEYS[1], 'folded', ARGV[1])
        end
        return 1
        """
    )

    /// A worker's run of a shard of a queue Redis lost (its fence is below the rebuilt queue's base):
    /// counts the positions it handed to senders that the rebuilt queue sends again as `resent`,
    /// once per position whoever reports.
    ///
    /// The rebuilt marks (shard → the end of the positions whose re-sending is counted already) start
    /// at the folded `sent` mark, past which the rebuild's own count (`in_flight`) does not reach,
    /// and each report raises its shard's. A shard without a mark was finished at the rebuild: it is
    /// not sent again.
    ///
    /// KEYS: 1 meta, 2 rebuilt, 3 stats. ARGV: 1 shard, 2 the run's fence, 3 the end of what it handed out.
    /// Returns the count added; -1 when the queue is missing (not rebuilt yet: report again later);
    /// -2 when the run belongs to this queue (its fence is at or above the queue's base: it lost a
    /// lease, not the queue, and the claim that follows counts its re-sends).
    static let countLostRun = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
        if tonumber(ARGV[2]) >= tonumber(redis.call('HGET', KEYS[1], 'fence_base') or '0') then return -2 end
        local mark = redis.call('HGET', KEYS[2], ARGV[1])
        if not mark then return 0 end
        local reached = tonumber(ARGV[3])
        if reached <= tonumber(mark) then return 0 end
        redis.call('HSET', KEYS[2], ARGV[1], reached)
        redis.call('HINCRBY', KEYS[3], 'resent', reached - tonumber(mark))
        return reached - tonumber(mark)
        """
    )
}
