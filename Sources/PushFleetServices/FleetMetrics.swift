import PushFleetCore
import CoreMetrics
import PushFleetPostgres
import PushFleetRedis
import Synchronization

/// What workers and coordinators count, through swift-metrics (the commands export it as
/// Prometheus text; `docs/operations.md` lists every metric). No token or payload is a label;
/// reasons are APNs' words, and a process keeps at most ``reasonLimit`` of them apart.
final class FleetMetrics: Sendable {
    /// Made on first use, after the process has bootstrapped its metrics backend.
    static let shared = FleetMetrics()
    static let reasonLimit = 64

    // MARK: Worker

    let accepted = Counter(label: "pushfleet_notifications_total", dimensions: [("outcome", "accepted"), ("reason", "")])
    private let byReason = Mutex<[ReasonKey: Counter]>([:])
    let shardsClaimed = Counter(label: "pushfleet_shards_claimed_total")
    let checkpointDuration = CoreMetrics.Timer(label: "pushfleet_checkpoint_duration_seconds")
    let checkpointFailures = Counter(label: "pushfleet_checkpoint_failures_total")
    private let runEndings: [ShardRun.Ending: Counter] = Dictionary(
        uniqueKeysWithValues: [(ShardRun.Ending.completed, "completed"), (.released, "released"), (.leaseLost, "lease_lost"), (.abandoned, "abandoned")]
            .map { ($0, Counter(label: "pushfleet_shard_runs_ended_total", dimensions: [("ending", $1)])) }
    )

    private struct ReasonKey: Hashable {
        var outcome: String
        var reason: String
    }

    /// Counts what APNs made of a batch of notifications.
    func count(_ batch: some Collection<DeliveryOutcome>) {
        var accepted = 0
        var others: [ReasonKey: Int] = [:]
        for outcome in batch {
            switch outcome {
            case .accepted: accepted += 1
            case .rejected(_, let rejection): others[ReasonKey(outcome: "rejected", reason: rejection.reason.rawValue), default: 0] += 1
            case .refused(_, _, let refusal):
                others[ReasonKey(outcome: "deferred", reason: refusal.reason.rawValue), default: 0] += 1
            }
        }
        if accepted > 0 { self.accepted.increment(by: Int64(accepted)) }
        for (key, count) in others { self.counter(key).increment(by: Int64(count)) }
    }

    private func counter(_ key: ReasonKey) -> Counter {
        self.byReason.withLock { counters in
            if let counter = counters[key] { return counter }
            let label = Self.reasonLabel(key.reason, kept: counters.count)
            let bounded = ReasonKey(outcome: key.outcome, reason: label)
            let counter = counters[bounded] ?? Counter(label: "pushfleet_notifications_total", dimensions: [("outcome", key.outcome), ("reason", label)])
            counters[bounded] = counter
            // Raw reasons that map to `other` are remembered only while few: this map stays bounded too.
            if counters.count < 2 * Self.reasonLimit { counters[key] = counter }
            return counter
        }
    }

    /// The label for `reason` when `kept` reasons have labels already: APNs' reasons are plain
    /// words; anything else, or anything past ``reasonLimit``, is `other`, so that a gateway cannot
    /// grow the metric without bound.
    static func reasonLabel(_ reason: String, kept: Int) -> String {
        let plain = !reason.isEmpty && reason.unicodeScalars.count <= 48
            && reason.unicodeScalars.allSatisfy { ("A"..."Z").contains($0) || ("a"..."z").contains($0) || ("0"..."9").contains($0) }
        return plain && kept < Self.reasonLimit ? reason : "other"
    }

    func ended(_ ending: ShardRun.Ending) {
        self.runEndings[ending]?.increment()
    }

    // MARK: Coordinator

    let leader = Meter(label: "pushfleet_coordinator_leader")
    let shardsReaped = Counter(label: "pushfleet_shards_reaped_total")
    let roundDuration = CoreMetrics.Timer(label: "pushfleet_coordinator_round_duration_seconds")
    /// Seconds between now and the newest event folded of the campaign furthest behind; 0 when
    /// every campaign's events are folded.
    let foldLag = Meter(label: "pushfleet_fold_lag_seconds")
    private let campaignGauges: [CampaignState: Meter] = Dictionary(
        uniqueKeysWithValues: CampaignState.allCases.map { ($0, Meter(label: "pushfleet_campaigns", dimensions: [("state", $0.rawValue)])) }
    )
    private let deadShards = Meter(label: "pushfleet_dead_shards")
    private let pendingGauges = Mutex<[TopicKey: Meter]>([:])

    private struct TopicKey: Hashable {
        var topic: String
        var environment: APNsEnvironment
    }

    /// Sets the gauges read from Postgres at each scrape: campaigns by state, and for the
    /// unfinished ones the tokens pending per topic and environment (0 for a topic with none left)
    /// and the shards set aside as dead.
    func observe(counts: [CampaignState: Int], unfinished: [CampaignRecord]) {
        var pending: [TopicKey: Int] = [:]
        var dead = 0
        for campaign in unfinished where !campaign.state.isFinal {
            dead += campaign.deadShards.count
            pending[TopicKey(topic: campaign.topic, environment: campaign.environment), default: 0] += max(0, campaign.pending)
        }
        for (state, gauge) in self.campaignGauges { gauge.set(counts[state] ?? 0) }
        self.deadShards.set(dead)
        self.pendingGauges.withLock { gauges in
            for key in Set(gauges.keys).union(pending.keys) {
                let gauge = gauges[key] ?? Meter(label: "pushfleet_pending_tokens", dimensions: [("topic", key.topic), ("environment", key.environment.rawValue)])
                gauges[key] = gauge
                gauge.set(pending[key] ?? 0)
            }
        }
    }
}

extension CoreMetrics.Timer {
    func record(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.recordNanoseconds(seconds &* 1_000_000_000 &+ attoseconds / 1_000_000_000)
    }
}
