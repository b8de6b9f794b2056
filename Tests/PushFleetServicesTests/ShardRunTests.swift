import APNSTransport
import Foundation
import Logging
import PushFleetCore
import PushFleetRedis
import PushFleetTestSupport
import Synchronization
import Testing

@testable import PushFleetServices

/// A shard run end to end without Redis or a socket: the run reads from an ``InMemoryShardQueue``
/// and sends to an ``AnsweringChannel`` that answers each notification as the test says; what
/// reaches the queue (checkpoints, completion, release, a pause) is what Redis would have got.
@Suite struct ShardRunTests {
    /// A ``DeliveryChannel`` that answers every notification as soon as it is sent: accepted,
    /// unless `answer` says otherwise. `afterSend` runs once per send, with the tokens sent so far.
    /// Past `writesAtMost` tokens it writes nothing more: what it is given waits in its queue,
    /// unanswered, and can be withdrawn, as in a sender whose connection stalled.
    final class AnsweringChannel: DeliveryChannel {
        let outcomes: AsyncStream<[DeliveryOutcome]>
        private let continuation: AsyncStream<[DeliveryOutcome]>.Continuation
        private let answer: @Sendable (DeviceToken, UInt64) -> DeliveryOutcome
        private let afterSend: @Sendable (Int) -> Void
        private let writesAtMost: Int
        /// Tokens written (and answered), and the tags of those queued unwritten.
        private let state = Mutex((written: 0, queued: [UInt64]()))

        init(
            writesAtMost: Int = .max,
            answer: @escaping @Sendable (DeviceToken, UInt64) -> DeliveryOutcome = { .accepted(tag: $1) },
            afterSend: @escaping @Sendable (Int) -> Void = { _ in }
        ) {
            (self.outcomes, self.continuation) = AsyncStream.makeStream(of: [DeliveryOutcome].self)
            self.writesAtMost = writesAtMost
            self.answer = answer
            self.afterSend = afterSend
        }

        var tokensWanted: Int? { nil }
        var tokensSent: Int { self.state.withLock { $0.written } }

        func send(_ tokens: [DeviceToken], values: [[UInt8]]?, firstTag: UInt64, template: CampaignTemplate) async throws {
            let written = self.state.withLock { state in
                let count = max(0, min(tokens.count, self.writesAtMost - state.written))
                state.written += count
                state.queued += (count..<tokens.count).map { firstTag + UInt64($0) }
                return count
            }
            self.continuation.yield(tokens.prefix(written).enumerated().map { self.answer($1, firstTag + UInt64($0)) })
            self.afterSend(self.tokensSent)
        }
        func withdraw(runTag: UInt64) async -> [UInt64] {
            self.state.withLock { state in
                let tags = state.queued.filter { $0 & SlotContext.runTagMask == runTag }
                state.queued.removeAll { $0 & SlotContext.runTagMask == runTag }
                return tags
            }
        }
        func setWriteDeadline(_ deadline: ContinuousClock.Instant?) {}
        func totals() async -> SenderTotals { SenderTotals() }
        func shutdown() async { self.continuation.finish() }
    }

    static let runTag: UInt64 = 1 << 32
    static let stale: UInt8 = 0xEE

    /// `count` tokens; every tenth is "stale" (first byte 0xEE) when `withStale`.
    static func tokens(_ count: Int, withStale: Bool = false) -> [DeviceToken] {
        (0..<count).map { index in
            var bytes = [UInt8](repeating: 0, count: 32)
            bytes[0] = withStale && index % 10 == 3 ? Self.stale : 1
            bytes[28] = UInt8(truncatingIfNeeded: index >> 24)
            bytes[29] = UInt8(truncatingIfNeeded: index >> 16)
            bytes[30] = UInt8(truncatingIfNeeded: index >> 8)
            bytes[31] = UInt8(truncatingIfNeeded: index)
            return try! DeviceToken(bytes: bytes)
        }
    }

    /// Runs the queue's shard on `channel` to its end.
    static func run(_ queue: InMemoryShardQueue, on channel: AnsweringChannel, lease: ShardLease? = nil) async throws -> ShardRun.Ending {
        // A lease of ten minutes: a run counts a lease gone by its own clock, and on two cores busy
        // with dozens of suites a 30-second lease ran out in a run whose checkpoints failed twice
        // (abandoned, with nothing checkpointed). Losing a lease is the takeover test's, on purpose.
        var configuration = WorkerService.Configuration(topic: "com.example.app", environment: .sandbox, workerID: "worker-a")
        configuration.leaseMilliseconds = 600_000
        let environment = ShardRunEnvironment(
            queue: queue, configuration: configuration, logger: Logger(label: "test"), endedRuns: EndedRuns(), paced: PacedCampaigns()
        )
        let template = CampaignTemplate(
            wire: .binary(payload: try Payload(jsonText: Array(#"{"aps":{"alert":"hi"}}"#.utf8), format: .binaryFrame), expiration: 0, priority: 10),
            personalization: nil
        )
        let slot = SlotContext(channel: channel)
        let (inputs, continuation) = AsyncStream.makeStream(of: SlotInput.self)
        slot.register(Self.runTag, continuation)
        let routing = slot.startRouting()
        var run = ShardRun(
            environment: environment, lease: lease ?? queue.lease(), leasedAt: .now, template: template, slot: slot, runTag: Self.runTag,
            drain: DrainSignal(), onFeedEnded: {}
        )
        let ending = await run.execute(inputs: inputs, continuation: continuation)
        slot.unregister(Self.runTag)
        await channel.shutdown()
        await routing.value
        return ending
    }

    @Test func aShardWhoseTokensAreAllAcceptedIsCheckpointedAndCompletedOnce() async throws {
        let queue = InMemoryShardQueue(tokens: Self.tokens(1_250))
        let ending = try await Self.run(queue, on: AnsweringChannel())
        #expect(ending == .completed)
        #expect(queue.isCompleted)
        #expect(queue.releases.isEmpty)
        #expect(queue.checkpoints.map(\.accepted).reduce(0, +) == 1_250)
        #expect(queue.checkpoints.allSatisfy { $0.rejections.isEmpty && $0.resent == 0 })
        #expect(queue.cursor == 1_250)
        #expect(queue.checkpoints.map(\.sequence) == Array(1...queue.checkpoints.count))
    }

    /// Tags a channel was asked to send.
    final class SentTags: Sendable {
        private let tags = Mutex<[UInt64]>([])
        func record(_ tag: UInt64) { self.tags.withLock { $0.append(tag) } }
        var positions: [Int] { self.tags.withLock { $0.map { Int($0 & ~SlotContext.runTagMask) } } }
    }

    @Test func positionsAnEarlierHolderDeliveredAreCountedOnceAndNeverSent() async throws {
        let queue = InMemoryShardQueue(tokens: Self.tokens(1_000))
        // Runs at a window's edges, inside windows, and the shard's first and last positions.
        let delivered = [0, 1] + Array(stride(from: 100, to: 300, by: 3)) + [499, 500, 501, 998, 999]
        let sent = SentTags()
        let channel = AnsweringChannel { _, tag in
            sent.record(tag)
            return .accepted(tag: tag)
        }
        #expect(try await Self.run(queue, on: channel, lease: queue.lease(delivered: delivered)) == .completed)
        #expect(Set(sent.positions).isDisjoint(with: delivered))
        #expect(sent.positions.count == 1_000 - delivered.count)
        #expect(Set(sent.positions).union(delivered) == Set(0..<1_000))
        #expect(queue.checkpoints.map(\.accepted).reduce(0, +) == 1_000)
        #expect(queue.checkpoints.allSatisfy { $0.resent == 0 })
    }

    @Test func eachRejectionReachesACheckpointOnceWithItsReason() async throws {
        let tokens = Self.tokens(1_000, withStale: true)
        let queue = InMemoryShardQueue(tokens: tokens)
        let channel = AnsweringChannel { token, tag in
            token.bytes[0] == Self.stale ? .rejected(tag: tag, Rejection(token: token, reason: .unregistered)) : .accepted(tag: tag)
        }
        #expect(try await Self.run(queue, on: channel) == .completed)
        let rejections = queue.checkpoints.flatMap(\.rejections)
        #expect(rejections.count == 100)
        #expect(Set(rejections.map(\.token)) == Set(tokens.filter { $0.bytes[0] == Self.stale }))
        #expect(rejections.allSatisfy { $0.reason == .unregistered })
        #expect(queue.checkpoints.map(\.accepted).reduce(0, +) == 900)
    }

    @Test func aCheckpointRedisDidNotAnswerIsSentAgainAndCountedOnce() async throws {
        let queue = InMemoryShardQueue(tokens: Self.tokens(1_000))
        queue.failNext("checkpoint")
        queue.failNext("checkpoint")
        #expect(try await Self.run(queue, on: AnsweringChannel()) == .completed)
        #expect(queue.checkpoints.map(\.accepted).reduce(0, +) == 1_000)
        #expect(queue.cursor == 1_000)
    }

    @Test func aShardTakenOverStopsWithoutCompletingOrReleasing() async throws {
        let queue = InMemoryShardQueue(tokens: Self.tokens(5_000))
        // Another worker claims the shard once 1,000 tokens went out.
        let channel = AnsweringChannel(afterSend: { sent in if sent == 1_000 { queue.takeOver() } })
        #expect(try await Self.run(queue, on: channel) == .leaseLost)
        #expect(!queue.isCompleted)
        #expect(queue.releases.isEmpty)
        #expect(channel.tokensSent < 5_000)
        #expect(queue.cursor <= 1_000)
    }

    @Test func aPausedCampaignReleasesTheShardWhereItsOutcomesEndAndWithdrawsTheRest() async throws {
        let queue = InMemoryShardQueue(tokens: Self.tokens(20_000))
        queue.setStatus(.paused)
        // 1,000 tokens go out and are answered; the rest wait in the channel, unwritten.
        let channel = AnsweringChannel(writesAtMost: 1_000)
        #expect(try await Self.run(queue, on: channel) == .released)
        #expect(!queue.isCompleted)
        #expect(queue.releases == [1_000])
        #expect(queue.cursor == 1_000)
        #expect(queue.checkpoints.map(\.accepted).reduce(0, +) == 1_000)
        #expect(await channel.withdraw(runTag: Self.runTag).isEmpty)  // taken back by the run
    }

    @Test func aProviderRefusalPausesTheCampaignAndReleasesTheShardWithTheTokenUnsent() async throws {
        let queue = InMemoryShardQueue(tokens: Self.tokens(1_000))
        let refusal = ProviderRefusal(reason: .invalidProviderToken, status: 403, isOutage: false)
        let channel = AnsweringChannel { token, tag in
            tag & 0xFFFF_FFFF == 500 ? .refused(tag: tag, token: token, refusal) : .accepted(tag: tag)
        }
        #expect(try await Self.run(queue, on: channel) == .released)
        #expect(queue.pauseRequests.count == 1)
        #expect(queue.pauseRequests.first?.reason.contains("InvalidProviderToken") == true)
        #expect(queue.pauseRequests.first?.outage == false)
        // The refused token is not counted: the shard goes back at it, to be sent after the resume.
        #expect(queue.releases == [500])
        #expect(queue.checkpoints.map(\.accepted).reduce(0, +) == 500)
        #expect(queue.checkpoints.allSatisfy { $0.rejections.isEmpty })
    }
}
