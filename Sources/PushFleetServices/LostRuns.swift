import Logging
import PushFleetRedis
import Synchronization

/// Runs that ended without their outcomes saved (a lease or checkpoint found nothing, a completion
/// or release was refused or failed), kept so that, if Redis had lost their queue, the positions
/// they handed to senders are counted as `resent` once the coordinator has rebuilt it: the
/// rebuilt queue sends them again from the folded cursors.
///
/// In memory and bounded: a worker that dies takes its entries with it (the rebuild's own count,
/// the tokens in flight at the last fold, still covers what was handed out before that fold).
final class LostRuns: Sendable {
    private struct Entry: Sendable {
        var lease: ShardLease
        var reached: Int
        var since: ContinuousClock.Instant
    }

    /// How many runs are kept at most; the oldest go first.
    static let limit = 1_000
    /// How long a run is kept while its campaign has no queue in Redis.
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

    /// Reports the kept runs, at most once per ``reportEvery``: each is dropped once counted, or
    /// once it proves to be of the queue Redis holds (a lease lost, not a queue), or after
    /// ``keepFor``; those whose campaign has no queue yet, or that Redis did not answer for, stay.
    func reportDue(to queue: CampaignQueue, logger: Logger, now: ContinuousClock.Instant = .now) async {
        let due = self.state.withLock { state -> [Entry] in
            guard !state.entries.isEmpty, now >= state.nextReport else { return [] }
            state.nextReport = now + Self.reportEvery
            defer { state.entries.removeAll() }
            return state.entries
        }
        var kept: [Entry] = []
        for (index, entry) in due.enumerated() {
            let metadata: Logger.Metadata = [
                "campaign": "\(entry.lease.campaign)", "shard": "\(entry.lease.shard)", "fence": "\(entry.lease.fence)",
            ]
            do {
                switch try await queue.countLostRun(entry.lease, reached: entry.reached) {
                case .counted(let count):
                    if count > 0 {
                        logger.notice("a run of a queue Redis lost was rebuilt; its re-sent positions are counted", metadata: metadata.merging(["resent": "\(count)"]) { $1 })
                    }
                case .sameQueue:
                    break
                case .queueMissing:
                    if now - entry.since < Self.keepFor { kept.append(entry) }
                }
            } catch {
                // Redis is unreachable: the rest waits for the next report.
                logger.warning("cannot report a lost run; will retry", metadata: metadata.merging(["error": "\(error)"]) { $1 })
                kept += due[index...].filter { now - $0.since < Self.keepFor }
                break
            }
        }
        guard !kept.isEmpty else { return }
        self.state.withLock { state in
            state.entries = Array((kept + state.entries).suffix(Self.limit))
        }
    }
}
