import Foundation
import PushFleetCore
import PushFleetRedis
import Testing

@testable import PushFleetServices

/// Transcripts of ``ShardRun/StateMachine``: inputs in, actions out, no Redis, no sockets, no sleeps.
struct ShardRunStateMachineTests {
    typealias Machine = ShardRun.StateMachine
    typealias Action = Machine.Action

    static let runTag: UInt64 = 7 << 32
    static let t0 = ContinuousClock.now
    static let configuration = WorkerService.Configuration(
        topic: "com.example.app", environment: .production, leaseMilliseconds: 3_000, checkpointEvery: 4,
        checkpointInterval: .seconds(1), drainTimeout: .seconds(20)
    )

    static func lease(cursor: Int = 0, count: Int = 10, fence: Int = 1, delivered: [Int] = []) -> ShardLease {
        ShardLease(campaign: UUID(), shard: 0, owner: "w|\(fence)", fence: fence, cursor: cursor, attempts: 0, tokenCount: count, delivered: delivered)
    }

    static func at(_ milliseconds: Int) -> ContinuousClock.Instant { t0 + .milliseconds(milliseconds) }

    static func accepted(_ positions: Int...) -> ArraySlice<DeliveryOutcome> {
        ArraySlice(positions.map { .accepted(tag: runTag | UInt64($0)) })
    }

    static func rejected(_ position: Int, _ reason: RejectionReason = .badDeviceToken) -> ArraySlice<DeliveryOutcome> {
        [.rejected(tag: runTag | UInt64(position), rejection(position, reason))]
    }

    static func rejection(_ position: Int, _ reason: RejectionReason = .badDeviceToken) -> Rejection {
        Rejection(token: try! DeviceToken(bytes: [UInt8](repeating: UInt8(position), count: 32)), reason: reason)
    }

    /// A machine that has started and handed `handed` positions to the channel.
    static func started(cursor: Int = 0, count: Int = 10, handed: Int = 10, delivered: [Int] = []) -> Machine {
        var machine = Machine(
            lease: lease(cursor: cursor, count: count, delivered: delivered), runTag: runTag, configuration: configuration, leasedAt: t0
        )
        #expect(machine.start(now: t0) == .extendWriteDeadline(until: t0 + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: t0) == .none)
        #expect(machine.handing(upTo: handed, now: t0) == .none)
        #expect(machine.fed(upTo: handed, now: t0) == .none)
        return machine
    }

    // MARK: - Counting

    @Test func inOrderOutcomesAreCheckpointedEveryFour() {
        var machine = Self.started()
        #expect(machine.outcomes(Self.accepted(0, 1, 2), now: Self.at(1)) == .none)
        #expect(machine.outcomes(Self.rejected(3), now: Self.at(2)) == .collectRepeats(fresh: false))
        #expect(
            machine.repeatsCollected(.init(resent: 2, retried: 1), now: Self.at(3))
                == .checkpoint(CheckpointDelta(sequence: 1, cursor: 4, accepted: 3, rejections: [Self.rejection(3)], resent: 2, retried: 1))
        )
        #expect(machine.checkpointConfirmed(.running, now: Self.at(4)) == .extendWriteDeadline(until: Self.at(3) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(4)) == .none)
    }

    @Test func outcomesAboveTheLowWaterMarkWaitForTheGap() {
        var machine = Self.started()
        // Answers 1…5 arrive before 0's: nothing below the mark, nothing to count yet.
        #expect(machine.outcomes(Self.accepted(1, 2, 3, 5), now: Self.at(1)) == .none)
        #expect(machine.outcomes(Self.rejected(4), now: Self.at(1)) == .none)
        #expect(machine.lowWater == 0)
        // 0 arrives: the mark jumps over 1…5, and their outcomes count, 4's rejection included.
        #expect(machine.outcomes(Self.accepted(0), now: Self.at(2)) == .collectRepeats(fresh: false))
        #expect(machine.lowWater == 6)
        #expect(
            machine.repeatsCollected(.init(), now: Self.at(2))
                == .checkpoint(CheckpointDelta(sequence: 1, cursor: 6, accepted: 5, rejections: [Self.rejection(4)]))
        )
    }

    @Test func rejectionsHeldAboveTheMarkAreCheckpointedInPositionOrder() {
        var machine = Self.started()
        // Rejections above the mark, answered out of order: each is held until the mark passes it.
        for position in [5, 2, 7, 3] {
            #expect(machine.outcomes(Self.rejected(position, position == 7 ? .unregistered : .badDeviceToken), now: Self.at(1)) == .none)
        }
        #expect(machine.outcomes(Self.accepted(1, 4, 6), now: Self.at(1)) == .none)
        #expect(machine.lowWater == 0)
        #expect(machine.outcomes(Self.accepted(0), now: Self.at(2)) == .collectRepeats(fresh: false))
        #expect(machine.lowWater == 8)
        #expect(
            machine.repeatsCollected(.init(), now: Self.at(2))
                == .checkpoint(
                    CheckpointDelta(
                        sequence: 1, cursor: 8, accepted: 4,
                        rejections: [Self.rejection(2), Self.rejection(3), Self.rejection(5), Self.rejection(7, .unregistered)]
                    )
                )
        )
    }

    @Test func aRejectionThatComesAfterAHigherOneIsHeldApartAndCountedInOrder() {
        var machine = Self.started()
        #expect(machine.outcomes(Self.rejected(2), now: Self.at(1)) == .none)
        #expect(machine.outcomes(Self.rejected(5), now: Self.at(1)) == .none)
        // The mark passes 0…2 and takes 2's rejection from the front.
        #expect(machine.outcomes(Self.accepted(0, 1), now: Self.at(2)) == .none)
        #expect(machine.lowWater == 3)
        // 4 comes after 5, and again with another reason: the repeat is ignored.
        #expect(machine.outcomes(Self.rejected(4) + Self.rejected(4, .unregistered), now: Self.at(3)) == .none)
        #expect(machine.outcomes(Self.accepted(3), now: Self.at(4)) == .collectRepeats(fresh: false))
        #expect(machine.lowWater == 6)
        #expect(
            machine.repeatsCollected(.init(), now: Self.at(4))
                == .checkpoint(CheckpointDelta(sequence: 1, cursor: 6, accepted: 3, rejections: [Self.rejection(2), Self.rejection(4), Self.rejection(5)]))
        )
        // Everything held was taken: the next one held starts the list again.
        #expect(machine.outcomes(Self.rejected(8), now: Self.at(5)) == .none)
        #expect(machine.checkpointConfirmed(.running, now: Self.at(5)) == .extendWriteDeadline(until: Self.at(4) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(5)) == .none)
        #expect(machine.outcomes(Self.accepted(6, 7), now: Self.at(6)) == .none)
        #expect(machine.outcomes(Self.accepted(9), now: Self.at(6)) == .collectRepeats(fresh: true))
        #expect(
            machine.repeatsCollected(.init(), now: Self.at(6))
                == .checkpoint(CheckpointDelta(sequence: 2, cursor: 10, accepted: 3, rejections: [Self.rejection(8)]))
        )
    }

    @Test func manyRejectionsHeldAboveAGapAreCountedOnceInOrder() {
        // 1,202 positions, all rejected but 0 and 1,101. 0 is answered after all but 1,201 and
        // 1,101, so the mark passes 1,100 held rejections at once; when 1,201's comes, 1,100 taken
        // (at least 1,024, and half of the 1,199 held) makes the list compact itself; 1,101 last.
        let count = 1_202
        let configuration = WorkerService.Configuration(
            topic: "com.example.app", environment: .production, leaseMilliseconds: 3_000, checkpointEvery: 100_000,
            checkpointInterval: .seconds(1), drainTimeout: .seconds(20)
        )
        func rejection(_ position: Int) -> Rejection {
            Rejection(token: try! DeviceToken(bytes: [UInt8(position >> 8), UInt8(position & 0xFF)] + [UInt8](repeating: 0, count: 30)), reason: .badDeviceToken)
        }
        func rejected(_ positions: some Sequence<Int>) -> ArraySlice<DeliveryOutcome> {
            ArraySlice(positions.map { .rejected(tag: Self.runTag | UInt64($0), rejection($0)) })
        }
        var machine = Machine(lease: Self.lease(count: count), runTag: Self.runTag, configuration: configuration, leasedAt: Self.t0)
        _ = machine.start(now: Self.t0)
        _ = machine.writeDeadlineExtended(now: Self.t0)
        _ = machine.handing(upTo: count, now: Self.t0)
        _ = machine.fed(upTo: count, now: Self.t0)
        #expect(machine.outcomes(rejected(1...1_100), now: Self.at(1)) == .none)
        #expect(machine.outcomes(rejected(1_102...1_200), now: Self.at(1)) == .none)
        #expect(machine.outcomes(Self.accepted(0), now: Self.at(2)) == .none)
        #expect(machine.lowWater == 1_101)
        #expect(machine.outcomes(rejected([1_201]), now: Self.at(3)) == .none)
        #expect(machine.outcomes(Self.accepted(1_101), now: Self.at(4)) == .collectRepeats(fresh: true))
        #expect(machine.lowWater == count)
        let expected = (1...1_100).map(rejection) + (1_102...1_201).map(rejection)
        #expect(
            machine.repeatsCollected(.init(), now: Self.at(4))
                == .checkpoint(CheckpointDelta(sequence: 1, cursor: count, accepted: 2, rejections: expected))
        )
    }

    @Test func aRetryThatLandsAfterALaterAnswerCountsOnce() {
        var machine = Self.started(count: 4, handed: 4)
        #expect(machine.outcomes(Self.accepted(1), now: Self.at(1)) == .none)
        // 0 was reset and sent again; both copies are answered, one after the other.
        #expect(machine.outcomes(Self.accepted(0, 0, 1), now: Self.at(2)) == .none)
        #expect(machine.outcomes(Self.rejected(2), now: Self.at(3)) == .none)
        #expect(machine.outcomes(Self.accepted(2, 3, 3), now: Self.at(4)) == .collectRepeats(fresh: true))
        #expect(
            machine.repeatsCollected(.init(), now: Self.at(4))
                == .checkpoint(CheckpointDelta(sequence: 1, cursor: 4, accepted: 3, rejections: [Self.rejection(2)]))
        )
        #expect(machine.checkpointConfirmed(.running, now: Self.at(5)) == .extendWriteDeadline(until: Self.at(4) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(5)) == .complete)
        #expect(machine.tick(now: Self.at(6)) == .none, "an ended run does nothing")
    }

    @Test func outcomesOfOtherRunsAndUnknownPositionsAreIgnored() {
        var machine = Self.started(cursor: 2, count: 6, handed: 6)
        let strangers: ArraySlice<DeliveryOutcome> = [
            .accepted(tag: (8 << 32) | 2), .accepted(tag: Self.runTag | 1), .accepted(tag: Self.runTag | 6), .accepted(tag: Self.runTag | 99),
        ]
        #expect(machine.outcomes(strangers, now: Self.at(1)) == .none)
        #expect(machine.lowWater == 2)
    }

    // MARK: - Takeover

    @Test func aResumedShardCountsEachPositionOnceAcrossHolders() {
        // The first holder has outcomes for 0, 1, 3 and 4 (2 is slow), checkpoints, and dies.
        var first = Self.started(count: 6, handed: 6)
        #expect(first.outcomes(Self.accepted(0, 1, 3), now: Self.at(1)) == .none)
        #expect(first.outcomes(Self.rejected(4), now: Self.at(1)) == .none)
        #expect(first.tick(now: Self.at(1_000)) == .collectRepeats(fresh: false))
        let saved = CheckpointDelta(sequence: 1, cursor: 2, accepted: 2)
        #expect(first.repeatsCollected(.init(), now: Self.at(1_000)) == .checkpoint(saved))

        // The next holder resumes at the stored cursor, 2, and everything from there is its own.
        var second = Self.started(cursor: saved.cursor, count: 6, handed: 6)
        #expect(second.outcomes(Self.accepted(5, 2, 3), now: Self.at(200)) == .none)
        #expect(second.outcomes(Self.rejected(4), now: Self.at(200)) == .collectRepeats(fresh: true))
        let last = CheckpointDelta(sequence: 1, cursor: 6, accepted: 3, rejections: [Self.rejection(4)])
        #expect(second.repeatsCollected(.init(), now: Self.at(200)) == .checkpoint(last))
        #expect(saved.accepted + last.accepted + last.rejections.count == 6, "each position counted once")
    }

    // MARK: - Checkpoint answers

    @Test func aCheckpointWhoseAnswerWasLostIsSentAgainUnchanged() {
        var machine = Self.started()
        #expect(machine.outcomes(Self.accepted(0, 1, 2, 3), now: Self.at(1)) == .collectRepeats(fresh: false))
        let first = CheckpointDelta(sequence: 1, cursor: 4, accepted: 4, resent: 1)
        #expect(machine.repeatsCollected(.init(resent: 1), now: Self.at(1)) == .checkpoint(first))
        #expect(machine.checkpointFailed(now: Self.at(2)) == .none)
        // More outcomes come meanwhile; the lost checkpoint goes first, exactly as it was.
        #expect(machine.outcomes(Self.accepted(4, 5), now: Self.at(500)) == .none)
        #expect(machine.tick(now: Self.at(1_001)) == .checkpoint(first))
        #expect(machine.checkpointConfirmed(.running, now: Self.at(1_002)) == .extendWriteDeadline(until: Self.at(1_001) + .seconds(2)))
        // Then what came after it, with a new number.
        #expect(machine.writeDeadlineExtended(now: Self.at(1_002)) == .collectRepeats(fresh: false))
        #expect(machine.repeatsCollected(.init(), now: Self.at(1_002)) == .checkpoint(CheckpointDelta(sequence: 2, cursor: 6, accepted: 2)))
    }

    @Test func noConfirmedCheckpointForAWholeLeaseDropsTheShard() {
        var machine = Self.started()
        #expect(machine.outcomes(Self.accepted(0, 1, 2, 3), now: Self.at(1)) == .collectRepeats(fresh: false))
        #expect(machine.repeatsCollected(.init(resent: 5, retried: 2), now: Self.at(1)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 4, accepted: 4, resent: 5, retried: 2)))
        #expect(machine.checkpointFailed(now: Self.at(2)) == .none)
        #expect(machine.tick(now: Self.at(1_500)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 4, accepted: 4, resent: 5, retried: 2)))
        // Three seconds after the last confirmed checkpoint (the start), another worker may hold it.
        #expect(machine.checkpointFailed(now: Self.at(3_000)) == .end(.abandoned, giveBack: .init(resent: 5, retried: 2)))
    }

    @Test func theLeaseIsTimedFromTheClaimNotFromTheRunsStart() {
        // The claim was sent at t0; its answer and the template took 800 ms before the run began.
        var machine = Machine(lease: Self.lease(), runTag: Self.runTag, configuration: Self.configuration, leasedAt: Self.t0)
        #expect(machine.start(now: Self.at(800)) == .extendWriteDeadline(until: Self.t0 + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(800)) == .none)
        #expect(machine.handing(upTo: 4, now: Self.at(800)) == .none)
        #expect(machine.outcomes(Self.accepted(0, 1, 2, 3), now: Self.at(900)) == .collectRepeats(fresh: false))
        #expect(machine.repeatsCollected(.init(), now: Self.at(900)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 4, accepted: 4)))
        // No answer until three seconds after the claim, not after the start: the lease may be gone.
        #expect(machine.checkpointFailed(now: Self.at(3_000)) == .end(.abandoned, giveBack: .init()))
    }

    @Test func aLeaseLostMidWindowEndsTheRunAndGivesTheRepeatsBack() {
        var machine = Self.started()
        #expect(machine.outcomes(Self.accepted(0, 2, 3, 4, 5), now: Self.at(1)) == .none)
        #expect(machine.tick(now: Self.at(1_000)) == .collectRepeats(fresh: false))
        #expect(machine.repeatsCollected(.init(resent: 3), now: Self.at(1_000)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 1, accepted: 1, resent: 3)))
        #expect(machine.checkpointRefused() == .end(.leaseLost, giveBack: .init(resent: 3)))
        #expect(machine.outcomes(Self.accepted(1), now: Self.at(1_001)) == .none, "an ended run does nothing")
    }

    @Test func aLeaseLostOnReadEndsTheRun() {
        var machine = Self.started()
        #expect(machine.outcomes(Self.accepted(0), now: Self.at(1)) == .none)
        #expect(machine.leaseLost() == .end(.leaseLost, giveBack: .init()))
    }

    // MARK: - Provider-level refusals

    static func deferred(_ position: Int, _ reason: RejectionReason = .invalidProviderToken) -> ArraySlice<DeliveryOutcome> {
        [.refused(tag: runTag | UInt64(position), token: rejection(position).token, ProviderRefusal(reason: reason, status: 403, isOutage: false))]
    }

    @Test func aProviderLevelRefusalPausesTheCampaignAndCountsNothing() {
        var machine = Self.started(count: 10, handed: 6)
        #expect(machine.outcomes(Self.accepted(0, 1), now: Self.at(1)) == .none)
        // 2 is refused for the provider's sake: the campaign is paused, the run stops feeding.
        #expect(machine.outcomes(Self.deferred(2), now: Self.at(2)) == .pauseCampaign(PauseRequest(reason: "InvalidProviderToken (HTTP 403)", isOutage: false)))
        #expect(machine.pauseRequested(now: Self.at(2)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(2)) == .none)
        #expect(machine.feedEnded(now: Self.at(3)) == .withdraw)
        #expect(machine.withdrawn([], now: Self.at(3)) == .none)
        // The rest of what was written comes back: one more refusal (asked for once), an
        // acceptance and a rejection above the refused position.
        #expect(machine.outcomes(Self.deferred(3, .forbidden), now: Self.at(4)) == .none)
        #expect(machine.outcomes(Self.accepted(4), now: Self.at(4)) == .none)
        #expect(machine.outcomes(Self.rejected(5), now: Self.at(5)) == .collectRepeats(fresh: true))
        // Only what lies below the first refusal is counted. 4 was delivered: it goes with the
        // release, for the next holder to count without sending it again; 5, rejected, goes out
        // again (no delivery, so no re-send to count); 2 and 3 are neither rejected nor re-sent.
        #expect(machine.repeatsCollected(.init(), now: Self.at(5)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 2, accepted: 2)))
        #expect(machine.checkpointConfirmed(.paused, now: Self.at(6)) == .extendWriteDeadline(until: Self.at(5) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(6)) == .release(cursor: 2, delivered: [4], ending: .released))
        #expect(machine.deferredReason?.reason == "InvalidProviderToken (HTTP 403)")
    }

    @Test func aRejectionForWantOfAnAnswerAboveTheMarkIsCountedAsResentNotCarried() {
        var machine = Self.started(count: 6, handed: 6)
        // 3 had no answer to any attempt while others were answered: rejected, yet APNs may have
        // delivered it. Then 1 is refused as an outage.
        #expect(machine.outcomes(Self.accepted(0, 2, 4), now: Self.at(1)) == .none)
        #expect(machine.outcomes(Self.rejected(3, .connectionLost), now: Self.at(1)) == .none)
        #expect(machine.outcomes(Self.rejected(5, .streamReset), now: Self.at(1)) == .none)
        let outage = ProviderRefusal(reason: .serviceUnavailable, status: 503, isOutage: true)
        let refused: ArraySlice<DeliveryOutcome> = [.refused(tag: Self.runTag | 1, token: Self.rejection(1).token, outage)]
        #expect(machine.outcomes(refused, now: Self.at(2)) == .pauseCampaign(PauseRequest(reason: "ServiceUnavailable (HTTP 503)", isOutage: true)))
        #expect(machine.pauseRequested(now: Self.at(2)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(2)) == .none)
        #expect(machine.feedEnded(now: Self.at(2)) == .withdraw)
        // Everything has an answer: 3 and 5 go out again and count as re-sent; 2 and 4 go with the release.
        #expect(machine.withdrawn([], now: Self.at(2)) == .collectRepeats(fresh: true))
        #expect(machine.repeatsCollected(.init(), now: Self.at(2)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 1, accepted: 1, resent: 2)))
        #expect(machine.checkpointConfirmed(.paused, now: Self.at(3)) == .extendWriteDeadline(until: Self.at(2) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(3)) == .release(cursor: 1, delivered: [2, 4], ending: .released))
    }

    @Test func aReleaseWhoseCheckpointFailedSendsItAgainUnchanged() {
        var machine = Self.started(count: 4, handed: 4)
        #expect(machine.outcomes(Self.deferred(0), now: Self.at(1)) == .pauseCampaign(PauseRequest(reason: "InvalidProviderToken (HTTP 403)", isOutage: false)))
        #expect(machine.pauseRequested(now: Self.at(1)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(1)) == .none)
        #expect(machine.feedEnded(now: Self.at(1)) == .withdraw)
        #expect(machine.withdrawn([], now: Self.at(1)) == .none)
        #expect(machine.outcomes(Self.accepted(1, 2, 3), now: Self.at(2)) == .collectRepeats(fresh: true))
        let release = CheckpointDelta(sequence: 1, cursor: 0, resent: 1)
        #expect(machine.repeatsCollected(.init(resent: 1), now: Self.at(2)) == .checkpoint(release))
        #expect(machine.checkpointFailed(now: Self.at(3)) == .none)
        #expect(machine.tick(now: Self.at(1_500)) == .checkpoint(release), "sent again as it was, its repeats not added twice")
        #expect(machine.checkpointConfirmed(.paused, now: Self.at(1_501)) == .extendWriteDeadline(until: Self.at(1_500) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(1_501)) == .release(cursor: 0, delivered: [1, 2, 3], ending: .released))
    }

    // MARK: - Stopping

    @Test func aDrainTakesBackTheUnwrittenTailWaitsForWhatIsOutAndReleasesTheRest() {
        var machine = Self.started(count: 12, handed: 10)
        #expect(machine.outcomes(Self.accepted(0, 1), now: Self.at(1)) == .none)
        #expect(machine.drainRequested(now: Self.at(2)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(2)) == .none)
        // Once the feeder is done, what it handed over and the channel never wrote (6…9) is taken
        // back: the drain waits only for 2…5, which are out.
        #expect(machine.feedEnded(now: Self.at(3)) == .withdraw)
        #expect(machine.withdrawn((6..<10).map { Self.runTag | UInt64($0) }, now: Self.at(3)) == .none)
        #expect(machine.outcomes(Self.accepted(5, 3, 4), now: Self.at(4)) == .none)
        #expect(machine.outcomes(Self.accepted(2), now: Self.at(5)) == .collectRepeats(fresh: true))
        #expect(machine.repeatsCollected(.init(), now: Self.at(5)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 6, accepted: 6)))
        #expect(machine.checkpointConfirmed(.running, now: Self.at(6)) == .extendWriteDeadline(until: Self.at(5) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(6)) == .release(cursor: 6, delivered: [], ending: .released))
    }

    @Test func aDrainThatRunsOutOfTimeHaltsCountsTheRestAsResentAndReleases() {
        var machine = Self.started(count: 10, handed: 8)
        #expect(machine.outcomes(Self.accepted(0, 1, 3, 4), now: Self.at(1)) == .none)
        #expect(machine.drainRequested(now: Self.at(2)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(2)) == .none)
        #expect(machine.feedEnded(now: Self.at(3)) == .withdraw)
        #expect(machine.withdrawn([Self.runTag | 7], now: Self.at(3)) == .none)
        // Heartbeats go on while it waits.
        #expect(machine.tick(now: Self.at(1_000)) == .collectRepeats(fresh: false))
        #expect(machine.repeatsCollected(.init(), now: Self.at(1_000)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 2, accepted: 2)))
        #expect(machine.checkpointConfirmed(.running, now: Self.at(1_001)) == .extendWriteDeadline(until: Self.at(1_000) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(1_001)) == .none)
        // 20 s after the drain began, 2 is still out: stop the channel first, then save and release.
        #expect(machine.tick(now: Self.at(20_002)) == .haltChannel)
        #expect(machine.channelHalted(now: Self.at(20_002)) == .collectRepeats(fresh: true))
        // 2, 5 and 6 were written without an answer: they may have been delivered, and go out
        // again. 3 and 4 were accepted: they go with the release. 7 was taken back unwritten.
        #expect(machine.repeatsCollected(.init(resent: 1), now: Self.at(20_002)) == .checkpoint(CheckpointDelta(sequence: 2, cursor: 2, resent: 4)))
        #expect(machine.checkpointConfirmed(.running, now: Self.at(20_003)) == .extendWriteDeadline(until: Self.at(20_002) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(20_003)) == .release(cursor: 2, delivered: [3, 4], ending: .abandoned))
    }

    @Test func aPausedCampaignStopsTheRunAtItsNextCheckpoint() {
        var machine = Self.started(count: 10, handed: 4)
        #expect(machine.outcomes(Self.accepted(0, 1, 2, 3), now: Self.at(1)) == .collectRepeats(fresh: false))
        #expect(machine.repeatsCollected(.init(), now: Self.at(1)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 4, accepted: 4)))
        #expect(machine.checkpointConfirmed(.paused, now: Self.at(2)) == .extendWriteDeadline(until: Self.at(1) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(2)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(2)) == .none)
        #expect(machine.feedEnded(now: Self.at(3)) == .withdraw)
        #expect(machine.withdrawn([], now: Self.at(3)) == .collectRepeats(fresh: true))
        #expect(machine.repeatsCollected(.init(), now: Self.at(3)) == .checkpoint(CheckpointDelta(sequence: 2, cursor: 4)))
        #expect(machine.checkpointConfirmed(.paused, now: Self.at(4)) == .extendWriteDeadline(until: Self.at(3) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(4)) == .release(cursor: 4, delivered: [], ending: .released))
    }

    @Test func aResetChannelGivesTheShardUpAtOnce() {
        var machine = Self.started(count: 10, handed: 5)
        #expect(machine.outcomes(Self.accepted(0, 1, 4), now: Self.at(1)) == .none)
        #expect(machine.channelReset(now: Self.at(2)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(2)) == .haltChannel)
        #expect(machine.channelHalted(now: Self.at(2)) == .collectRepeats(fresh: true))
        #expect(machine.repeatsCollected(.init(), now: Self.at(2)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 2, accepted: 2, resent: 2)))
        #expect(machine.checkpointConfirmed(.running, now: Self.at(3)) == .extendWriteDeadline(until: Self.at(2) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(3)) == .release(cursor: 2, delivered: [4], ending: .abandoned))
    }

    // MARK: - Resuming after a holder that gave the shard back

    @Test func aResumedRunCountsWhatTheLastHolderDeliveredOnceAndLeavesItUnsent() {
        // The last holder released at 2, with 3 and 5 accepted above its mark.
        var machine = Self.started(cursor: 2, count: 10, delivered: [3, 5])
        // Handing 2…9 over settled 3 and 5; the mark waits for 2 as for any answer.
        #expect(machine.lowWater == 2)
        #expect(machine.outcomes(Self.accepted(2), now: Self.at(1)) == .none)
        #expect(machine.lowWater == 4)
        #expect(machine.outcomes(Self.accepted(4), now: Self.at(1)) == .collectRepeats(fresh: false))
        #expect(machine.repeatsCollected(.init(), now: Self.at(1)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 6, accepted: 4)))
        // An outcome for a delivered position (none should come: it was never sent) counts nothing.
        #expect(machine.checkpointConfirmed(.running, now: Self.at(2)) == .extendWriteDeadline(until: Self.at(1) + .seconds(2)))
        #expect(machine.writeDeadlineExtended(now: Self.at(2)) == .none)
        #expect(machine.outcomes(Self.accepted(3, 5), now: Self.at(3)) == .none)
        #expect(machine.outcomes(Self.accepted(6, 7, 8, 9), now: Self.at(4)) == .collectRepeats(fresh: true))
        #expect(machine.repeatsCollected(.init(), now: Self.at(4)) == .checkpoint(CheckpointDelta(sequence: 2, cursor: 10, accepted: 4)))
    }

    @Test func deliveredPositionsNotYetHandedOverGoWithTheNextRelease() {
        var machine = Self.started(cursor: 0, count: 10, handed: 5, delivered: [2, 8])
        #expect(machine.outcomes(Self.accepted(0, 1), now: Self.at(1)) == .none)
        #expect(machine.lowWater == 3)
        #expect(machine.drainRequested(now: Self.at(2)) == .stopFeeding)
        #expect(machine.feedingStopped(now: Self.at(2)) == .none)
        #expect(machine.feedEnded(now: Self.at(2)) == .withdraw)
        #expect(machine.withdrawn([Self.runTag | 4], now: Self.at(2)) == .none)
        #expect(machine.outcomes(Self.accepted(3), now: Self.at(3)) == .collectRepeats(fresh: true))
        #expect(machine.repeatsCollected(.init(), now: Self.at(3)) == .checkpoint(CheckpointDelta(sequence: 1, cursor: 4, accepted: 4)))
        #expect(machine.checkpointConfirmed(.running, now: Self.at(4)) == .extendWriteDeadline(until: Self.at(3) + .seconds(2)))
        // 8 was never reached: it stays delivered for the holder after this one.
        #expect(machine.writeDeadlineExtended(now: Self.at(4)) == .release(cursor: 4, delivered: [8], ending: .released))
    }

    @Test func aWindowIsSentInTheRunsBetweenDeliveredPositions() {
        #expect(ShardRun.unsent(10..<20, skipping: []) == [10..<20])
        #expect(ShardRun.unsent(10..<20, skipping: [3, 10, 12, 13, 19, 25]) == [11..<12, 14..<19])
        #expect(ShardRun.unsent(10..<12, skipping: [10, 11]) == [])
    }
}
