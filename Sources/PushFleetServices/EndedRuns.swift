import Foundation
import Logging
import PushFleetRedis
import Synchronization

/// The shard runs a worker ended whose work Postgres may not hold yet, kept until it does: if
/// Redis loses their queue first, the coordinator rebuilds it from the last fold and every position
/// they handed to senders past that fold goes out again. Reported once the queue is rebuilt, those
/// re-sends are counted in `resent` (``CampaignQueue/countLostRun(_:reached:)``).
///
/// A run is safe once Postgres holds a snapshot taken after it ended: the first report reads the
/// queue's snapshot number (`fold`, taken after the run's end), and the run is forgotten once the
/// coordinator has folded a higher one (`folded`). So a run is typically kept for one or two
/// coordinator rounds.
///
/// In memory and bounded: a worker that dies takes its runs with it (the rebuild's own count, the
/// tokens in flight at the last fold, still covers what was handed out before that fold).
final class EndedRuns: Sendable {
    private struct Entry: Sendable {
        var lease: ShardLease
        var reached: Int
        var since: ContinuousClock.Instant
        /// The queue's snapshot number seen after the run ended; nil until the first report.
        var endFold: Int? = nil
    }

    /// How many runs are kept at most; the oldest go first.
    static let limit = 100_000
    /// How long a run is kept at most (Postgres or Redis down, or the campaign over and removed).
    static let keepFor = Duration.seconds(900)
    /// How often the kept runs are reported.
    static let reportEvery = Duration.seconds(1)

    private let state = Mutex<(entries: [Entry], nextReport: ContinuousClock.Instant)>(([], .now))

    /// Keeps a run of `lease` that handed positions below `reached` to its channel.
    func record(_ lease: ShardLease, reached: Int, now: ContinuousClock.Instant = .now) {
        guard reached > lease.cursor else { return }
        self.state.withLock { state in
            if state.entries.count >= Self.limit { state.entries.removeFirst(state.entries.count - Self.limit + 1) }
            state.entries.append(Entry(lease: lease, reached: reached, since: now))
        }
    }

    /// How many runs are kept.
    var count: Int { self.state.withLock { $0.entries.count } }

    /// Goes through the kept runs, at most once per ``reportEvery``, one Redis read per campaign: a
    /// run of the queue Redis holds is forgotten once Postgres holds a snapshot taken after it
    /// ended; a run of a queue Redis lost is counted against the rebuilt one and forgotten; the rest
    /// (no queue yet, Redis unreachable) waits, at most ``keepFor``.
    func reportDue(to queue: CampaignQueue, logger: Logger, now: ContinuousClock.Instant = .now) async {
        let due = self.state.withLock { state -> [Entry] in
            guard !state.entries.isEmpty, now >= state.nextReport else { return [] }
            state.nextReport = now + Self.reportEvery
            defer { state.entries.removeAll() }
            return state.entries
        }
        guard !due.isEmpty else { return }
        var kept: [Entry] = []
        var unreachable = false
        for (campaign, runs) in Dictionary(grouping: due, by: \.lease.campaign) {
            if unreachable {
                kept += runs
                continue
            }
            do {
                kept += try await self.report(runs, campaign: campaign, to: queue, logger: logger)
            } catch {
                // Redis is unreachable: everything waits for the next report.
                logger.warning("cannot report ended runs; will retry", metadata: ["campaign": "\(campaign)", "error": "\(error)"])
                kept += runs
                unreachable = true
            }
        }
        kept = kept.filter { now - $0.since < Self.keepFor }
        guard !kept.isEmpty else { return }
        self.state.withLock { state in
            state.entries = Array((kept + state.entries).suffix(Self.limit))
        }
    }

    /// Reports one campaign's runs; returns those to keep. A run whose count failed midway is kept
    /// (a count is idempotent).
    private func report(_ runs: [Entry], campaign: UUID, to queue: CampaignQueue, logger: Logger) async throws -> [Entry] {
        guard let state = try await queue.foldState(campaign: campaign) else { return runs }
        var kept: [Entry] = []
        for var run in runs {
            if run.lease.fence >= state.fenceBase {
                if let end = run.endFold {
                    if state.folded <= end { kept.append(run) }
                } else {
                    run.endFold = state.fold
                    kept.append(run)
                }
                continue
            }
            switch try await queue.countLostRun(run.lease, reached: run.reached) {
            case .counted(let count):
                if count > 0 {
                    logger.notice(
                        "a run of a queue Redis lost was sent again from the rebuilt queue; its re-sent positions are counted",
                        metadata: [
                            "campaign": "\(campaign)", "shard": "\(run.lease.shard)", "fence": "\(run.lease.fence)", "resent": "\(count)",
                        ]
                    )
                }
            case .sameQueue:
                break
            case .queueMissing:
                kept.append(run)
            }
        }
        return kept
    }
}
