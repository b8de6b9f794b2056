import Foundation
import PushFleetCore
import PushFleetRedis
import Testing

@testable import PushFleetServices

/// Random interleavings of one shard's life: answers in any order and repeated, checkpoint answers
/// lost, an APNs outage answer that pauses the campaign, holders that die or drain at any moment (a
/// drain takes back an unwritten tail) and a next
/// holder that resumes at the stored cursor, leaving unsent what the last one released as delivered.
/// Redis is played by a few lines that apply a checkpoint and a release as the Lua scripts do.
/// Whatever happens, each position is counted exactly once when the shard completes, and a release
/// leaves as delivered only positions APNs accepted.
struct ShardRunInterleavingTests {
    typealias Machine = ShardRun.StateMachine

    /// The checkpoint script's effect: applied once per holder and sequence, cursor never lowered.
    struct StoredShard {
        var cursor = 0
        var accepted = 0
        var rejected: [Int] = []
        var applied: (holder: Int, sequence: Int) = (-1, 0)
        /// Positions past the cursor the last release left as delivered.
        var delivered: [Int] = []

        mutating func apply(_ delta: CheckpointDelta, holder: Int) {
            guard holder != self.applied.holder || delta.sequence > self.applied.sequence else { return }
            self.applied = (holder, delta.sequence)
            self.cursor = max(self.cursor, delta.cursor)
            self.accepted += delta.accepted
            self.rejected += delta.rejections.map { Int($0.token.bytes.first!) }
        }

        /// The release script's effect: the cursor raised, the delivered positions replaced.
        mutating func release(cursor: Int, delivered: [Int]) {
            self.cursor = max(self.cursor, cursor)
            self.delivered = delivered
        }
    }

    @Test(arguments: 1...200)
    func eachPositionIsCountedOnceWhoeverHoldsTheShard(seed: UInt64) {
        var random = SplitMix(seed: seed)
        let count = 40
        let rejectedPositions = Set((0..<count).filter { $0 % 7 == 3 })
        var store = StoredShard()
        var holder = 0
        var clock = ContinuousClock.now
        var completed = false
        while !completed {
            holder += 1
            #expect(holder < 200, "the shard never completed")
            if holder >= 200 { return }
            let runTag = UInt64(holder) << 32
            let delivered = store.delivered.filter { $0 >= store.cursor }
            let lease = ShardLease(
                campaign: UUID(), shard: 0, owner: "w|\(holder)", fence: holder, cursor: store.cursor, attempts: 0, tokenCount: count,
                delivered: delivered
            )
            var machine = Machine(lease: lease, runTag: runTag, configuration: ShardRunStateMachineTests.configuration, leasedAt: clock)
            // Everything from the cursor is handed over at once, but what was delivered (never
            // sent); answers come in a random order, some twice; the holder may die before each one.
            var answers = (store.cursor..<count).filter { !delivered.contains($0) }
            var acceptedByThisRun: Set<Int> = []
            answers += answers.filter { _ in random.next() % 5 == 0 }
            answers.shuffle(using: &random)
            var alive = true
            // What a drain takes back: a tail above everything answered so far, as a FIFO
            // channel's never-written notifications are.
            var answeredSoFar = store.cursor - 1
            var withdrawable: [UInt64] = []
            var feedEnded = false
            func perform(_ first: Machine.Action) {
                var action = first
                while alive {
                    switch action {
                    case .none:
                        return
                    case .stopFeeding:
                        action = machine.feedingStopped(now: clock)
                    case .withdraw:
                        action = machine.withdrawn(withdrawable, now: clock)
                    case .pauseCampaign:
                        action = machine.pauseRequested(now: clock)
                    case .haltChannel:
                        action = machine.channelHalted(now: clock)
                    case .extendWriteDeadline:
                        action = machine.writeDeadlineExtended(now: clock)
                    case .collectRepeats:
                        action = machine.repeatsCollected(.init(), now: clock)
                    case .checkpoint(let delta):
                        switch random.next() % 6 {
                        case 0:  // lost before Redis
                            action = machine.checkpointFailed(now: clock)
                        case 1:  // applied, answer lost
                            store.apply(delta, holder: holder)
                            action = machine.checkpointFailed(now: clock)
                        default:
                            store.apply(delta, holder: holder)
                            action = machine.checkpointConfirmed(.running, now: clock)
                        }
                    case .complete:
                        completed = true
                        alive = false
                    case .release(let cursor, let left, _):
                        // Only what this run saw accepted, or its lease said was delivered.
                        let known = acceptedByThisRun.union(delivered)
                        #expect(left.allSatisfy { $0 >= cursor && known.contains($0) }, "left as delivered: \(left)")
                        store.release(cursor: cursor, delivered: left)
                        alive = false
                    case .end:
                        alive = false
                    }
                }
            }
            perform(machine.start(now: clock))
            perform(machine.handing(upTo: count, now: clock))
            perform(machine.fed(upTo: count, now: clock))
            var index = 0
            while index < answers.count && alive {
                let position = answers[index]
                index += 1
                if random.next() % 60 == 0 { alive = false; break }  // SIGKILL
                answeredSoFar = max(answeredSoFar, position)
                if !machine.isStopping && random.next() % 80 == 0 {  // SIGTERM
                    // Written so far: everything up to the highest position answered.
                    let cut = answeredSoFar + 1 + Int(random.next() % UInt64(count - answeredSoFar))
                    withdrawable = (cut..<count).map { runTag | UInt64($0) }
                    answers = Array(answers[..<index]) + answers[index...].filter { $0 < cut }
                    perform(machine.drainRequested(now: clock))
                    perform(machine.feedEnded(now: clock))
                    feedEnded = true
                }
                clock += .milliseconds(Int(random.next() % 400))
                let tag = runTag | UInt64(position)
                let outcome: DeliveryOutcome
                if random.next() % 50 == 0 {  // APNs failing past the retries: the campaign pauses
                    let refusal = ProviderRefusal(reason: .serviceUnavailable, status: 503, isOutage: true)
                    outcome = .refused(tag: tag, token: ShardRunStateMachineTests.rejection(position).token, refusal)
                } else if rejectedPositions.contains(position) {
                    outcome = .rejected(tag: tag, ShardRunStateMachineTests.rejection(position))
                } else {
                    outcome = .accepted(tag: tag)
                    acceptedByThisRun.insert(position)
                }
                perform(machine.outcomes([outcome], now: clock))
                if machine.isStopping && !feedEnded && alive {
                    // The pause stopped the feeder; everything was written, so nothing is taken back.
                    perform(machine.feedEnded(now: clock))
                    feedEnded = true
                }
                #expect(store.accepted + store.rejected.count <= count, "counted more outcomes than positions")
            }
            // Ticks until the run ends by itself (complete, or out of confirmations).
            var ticks = 0
            while alive && ticks < 100 {
                clock += .seconds(1)
                perform(machine.tick(now: clock))
                ticks += 1
            }
        }
        #expect(store.cursor == count)
        #expect(store.accepted + store.rejected.count == count)
        #expect(store.rejected.sorted() == rejectedPositions.sorted(), "each rejection counted once")
    }
}

/// A small deterministic generator, so a failing seed can be replayed.
struct SplitMix: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { self.state = seed }
    mutating func next() -> UInt64 {
        self.state &+= 0x9E37_79B9_7F4A_7C15
        var z = self.state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
