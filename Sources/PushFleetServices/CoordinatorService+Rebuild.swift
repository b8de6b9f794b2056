import Foundation
import Logging
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis

extension CoordinatorService {
    /// Shards read from Postgres and staged in Redis per step of a rebuild.
    static let rebuildBatch = 50

    /// Redis lost a running or paused campaign's queue (a `FLUSHALL`, a restart without
    /// persistence, a failover to a replica that had not caught up): rebuilds it from Postgres,
    /// which holds the last fold's counters and cursors (one snapshot) and the launch's audience.
    ///
    /// Each unfinished shard resumes at its folded cursor, so every outcome the counters hold
    /// stays counted once. What workers sent after that fold is sent again: the tokens the fold
    /// saw in flight count as `resent` here; those handed out after it are counted when the workers
    /// that held them report their lost runs (``CampaignQueue/countLostRun(_:reached:)``), past each
    /// shard's folded `sent` mark. Rejections folded into the counters but whose events were still
    /// in Redis keep their counts and lose their registry marks.
    ///
    /// A campaign whose audience is not stored (launched before PushFleet stored audiences) cannot
    /// be rebuilt and fails with the reason.
    func rebuildQueue(of campaign: CampaignRecord) async throws {
        let id = campaign.id
        self.logger.error("Redis lost the campaign's queue; rebuilding it from Postgres", metadata: ["campaign": "\(id)"])
        self.rounds.forgetFold(of: id)
        // First the generation: from here no fold of the lost queue can land, so what is read next
        // stays. Another coordinator that rebuilt it meanwhile has raised it, and this one stops.
        guard try await self.store.beginQueueRebuild(id, generation: campaign.queueGeneration) else { return }
        guard let launched = try await self.store.launchedCampaign(id), let point = try await self.store.recoveryPoint(id),
            let record = try await self.store.campaign(id)
        else { return }
        guard let launch = point.launch else {
            try await self.failUnrebuildable(campaign, "Redis lost the campaign's queue and its audience is not stored in Postgres")
            return
        }
        let restoration = QueueRestoration(
            descriptor: CampaignDescriptor(launched, status: CampaignQueueStatus(record.state)), launch: launch,
            tokenCounts: point.tokenCounts, cursors: point.cursors, sentMarks: point.sentMarks, deadShards: record.deadShards,
            counters: CampaignCounters(accepted: record.accepted, rejected: record.rejected, resent: record.resent, retried: record.retried),
            fold: point.foldSequence, fenceBase: QueueRestoration.fenceBase(generation: point.generation)
        )
        let personalized = launched.definition.personalized
        let staging = "rebuild-\(UUID().uuidString.lowercased())"
        let unfinished = restoration.unfinishedShards
        do {
            for start in stride(from: 0, to: unfinished.count, by: Self.rebuildBatch) {
                let batch = Array(unfinished[start..<min(start + Self.rebuildBatch, unfinished.count)])
                let stored = try await self.store.shardRecipients(campaign: id, shards: batch)
                var shards: [(shard: Int, tokens: [DeviceToken])] = []
                // A personalized campaign's values, staged with its tokens.
                var values: [RecipientValueList] = []
                for shard in batch {
                    guard let tokens = stored[shard]?.tokens, tokens.count == point.tokenCounts[shard],
                        (stored[shard]?.values != nil) == personalized
                    else {
                        let found = stored[shard].map { "\($0.tokens.count) tokens" + ($0.values == nil ? "" : " with values") } ?? "no row"
                        try await self.failUnrebuildable(
                            campaign,
                            "Redis lost the campaign's queue and shard \(shard)'s stored audience is incomplete "
                                + (personalized ? "or without its recipients' values " : "")
                                + "(launch \(launch): \(found), \(point.tokenCounts[shard]) expected)"
                        )
                        try? await self.queue.discardStaged(campaign: id, launch: staging, shardCount: launched.shardTokenCounts.count)
                        return
                    }
                    shards.append((shard: shard, tokens: tokens))
                    if let recipientValues = stored[shard]?.values { values.append(recipientValues) }
                }
                try await self.queue.stageShards(campaign: id, launch: staging, shards: shards, values: values.isEmpty ? nil : values)
            }
            guard try await self.queue.restore(restoration, staged: staging) else { return }
        } catch {
            // The staged lists would expire by themselves; the next round starts over.
            try? await self.queue.discardStaged(campaign: id, launch: staging, shardCount: launched.shardTokenCounts.count)
            throw error
        }
        self.logger.notice(
            "rebuilt the campaign's queue from Postgres",
            metadata: [
                "campaign": "\(id)", "shards_left": "\(unfinished.count)", "accepted": "\(record.accepted)",
                "rejected": "\(record.rejected.values.reduce(0, +))", "resent": "\(record.resent)",
            ]
        )
    }

    private func failUnrebuildable(_ campaign: CampaignRecord, _ reason: String) async throws {
        if try await self.store.setState(campaign.id, to: .failed, from: [.running, .paused], reason: reason) {
            self.logger.error("campaign failed", metadata: ["campaign": "\(campaign.id)", "reason": "\(reason)"])
        }
    }
}
