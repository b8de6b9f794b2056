import Foundation
import PushFleetCore

/// The Redis keys of one campaign. All share the hash tag `{<campaign id>}`, so every script over
/// them runs in one Redis Cluster slot.
struct CampaignKeys: Sendable {
    /// `pf:{<lowercase uuid>}`
    let prefix: String

    init(_ campaign: UUID) {
        self.prefix = "pf:{\(campaign.uuidString.lowercased())}"
    }

    private func key(_ suffix: String) -> [UInt8] { Array("\(self.prefix):\(suffix)".utf8) }

    /// HASH: the ``CampaignDescriptor`` fields, `status` among them.
    var meta: [UInt8] { self.key("meta") }
    /// LIST: shard ids ready to claim; released and reaped shards go back to the front.
    var pending: [UInt8] { self.key("pending") }
    /// ZSET: shard id → lease deadline, milliseconds of Redis `TIME`.
    var leases: [UInt8] { self.key("leases") }
    /// HASH: shard id → `worker|fence` of its holder.
    var owner: [UInt8] { self.key("owner") }
    /// STRING: the fencing counter, incremented by every claim.
    var fence: [UInt8] { self.key("fence") }
    /// HASH: shard id → first index without an outcome.
    var cursor: [UInt8] { self.key("cursor") }
    /// HASH: shard id → highest index handed to a sender + 1.
    var sent: [UInt8] { self.key("sent") }
    /// HASH: shard id → how many holders lost it.
    var attempts: [UInt8] { self.key("attempts") }
    /// HASH: shard id → the positions at or past its cursor already delivered, packed by
    /// ``DeliveredPositions``: what a run that gave the shard back knew was accepted above its
    /// mark, for the next holder to count without sending again.
    var delivered: [UInt8] { self.key("delivered") }
    /// HASH: shard id → `worker|fence#sequence` of the last checkpoint applied.
    var checkpoints: [UInt8] { self.key("ckseq") }
    /// HASH (a rebuilt queue only): shard id → the end of the positions whose re-sending is counted
    /// in `resent` already (see ``CampaignScripts/countLostRun``).
    var rebuilt: [UInt8] { self.key("rebuilt") }
    /// STRING, for 7 days (a finished campaign, not a notification): its queue was removed
    /// (``CampaignQueue/remove(campaign:topic:environment:kind:)``), and a rebuild begun before,
    /// by a coordinator frozen past its leadership, must not put it back (``CampaignScripts/restore``).
    var removed: [UInt8] { self.key("removed") }
    /// LIST: shard ids given up on after too many attempts.
    var dead: [UInt8] { self.key("dead") }
    /// HASH: `accepted`, `resent`, `done_shards`, `rejected:<reason>`.
    var stats: [UInt8] { self.key("stats") }
    /// STREAM: rejections and finished shards, for the coordinator.
    var events: [UInt8] { self.key("events") }
    /// HASH (a throttled campaign only): the fleet's token bucket, `level` (permits, fractional)
    /// and `at` (milliseconds of Redis `TIME` it was filled to). See ``CampaignScripts/read``.
    var bucket: [UInt8] { self.key("bucket") }

    /// LIST: the raw token bytes of `shard`.
    func shard(_ shard: Int) -> [UInt8] { self.key("s:\(shard)") }

    /// LIST: `shard`'s tokens as one launch staged them, renamed to ``shard(_:)`` when that launch
    /// publishes. Each launch has its own, so concurrent launches of one id never touch each
    /// other's keys.
    func staged(_ shard: Int, launch: String) -> [UInt8] { self.key("stage:\(launch):s:\(shard)") }

    /// Every key but the shard lists.
    var fixed: [[UInt8]] {
        [self.meta, self.pending, self.leases, self.owner, self.fence, self.cursor, self.sent, self.attempts, self.delivered,
         self.dead, self.stats, self.events, self.checkpoints, self.rebuilt, self.bucket]
    }

    /// `SCAN` pattern matching every key of the campaign.
    var pattern: [UInt8] { Array("\(self.prefix):*".utf8) }

    /// SET (no hash tag: touched only by single-key commands): ids of the active campaigns of a
    /// topic, `pf:active:<topic>:<environment>`, or of its notifications, `pf:now:<topic>:<environment>`.
    static func active(topic: String, environment: APNsEnvironment, kind: CampaignKind = .campaign) -> [UInt8] {
        switch kind {
        case .campaign: Array("pf:active:\(topic):\(environment.rawValue)".utf8)
        case .notification: Array("pf:now:\(topic):\(environment.rawValue)".utf8)
        }
    }

    /// LIST (no hash tag): one entry per notification published, popped by a worker blocked in
    /// `BLPOP` so that it claims at once instead of at its next poll. Capped at ``wakeCap`` entries.
    static func wake(topic: String, environment: APNsEnvironment) -> [UInt8] {
        Array("pf:wake:\(topic):\(environment.rawValue)".utf8)
    }

    /// The most entries ``wake(topic:environment:)`` keeps: more than enough to wake every worker.
    static let wakeCap = 1_000
}
