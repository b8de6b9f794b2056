import APNSTransport
import PushFleetCore
import Synchronization
import Testing

@testable import PushFleetServices

/// A worker slot's decisions without a socket: which run an outcome belongs to, what write
/// deadline the channel gets from its runs' leases, and how the channel's repeats are reported
/// once. ``InMemoryChannel`` stands in for the sender.
@Suite struct SlotContextTests {
    /// A ``DeliveryChannel`` that sends nothing: outcomes are pushed by the test, deadlines and
    /// totals are recorded and set by it.
    final class InMemoryChannel: DeliveryChannel {
        private struct State {
            var deadlines: [ContinuousClock.Instant?] = []
            var totals = SenderTotals()
        }

        private let state = Mutex(State())
        let outcomes: AsyncStream<[DeliveryOutcome]>
        private let continuation: AsyncStream<[DeliveryOutcome]>.Continuation

        init() {
            (self.outcomes, self.continuation) = AsyncStream.makeStream(of: [DeliveryOutcome].self)
        }

        var tokensWanted: Int? { nil }
        var deadlines: [ContinuousClock.Instant?] { self.state.withLock { $0.deadlines } }
        func setTotals(resent: Int, retried: Int) {
            self.state.withLock { $0.totals.resent = resent; $0.totals.retried = retried }
        }

        func push(_ batch: [DeliveryOutcome]) { self.continuation.yield(batch) }
        func send(_ tokens: [DeviceToken], values: [[UInt8]]?, firstTag: UInt64, template: CampaignTemplate) async throws {}
        func withdraw(runTag: UInt64) async -> [UInt64] { [] }
        func setWriteDeadline(_ deadline: ContinuousClock.Instant?) { self.state.withLock { $0.deadlines.append(deadline) } }
        func totals() async -> SenderTotals { self.state.withLock { $0.totals } }
        func shutdown() async { self.continuation.finish() }
    }

    static let runA: UInt64 = 1 << 32
    static let runB: UInt64 = 2 << 32

    /// Registers `runTag` and returns the tags of the outcomes routed to it, once the channel ends.
    static func collect(_ runTag: UInt64, in slot: SlotContext) -> Task<[UInt64], Never> {
        let (inputs, continuation) = AsyncStream.makeStream(of: SlotInput.self)
        slot.register(runTag, continuation)
        return Task {
            var tags: [UInt64] = []
            for await input in inputs {
                if case .outcomes(let batch) = input { tags += batch.map(\.tag) }
            }
            return tags
        }
    }

    @Test func outcomesGoToTheRunTheirTagNamesInOrderAndStrangersAreDropped() async {
        let channel = InMemoryChannel()
        let slot = SlotContext(channel: channel)
        let a = Self.collect(Self.runA, in: slot)
        let b = Self.collect(Self.runB, in: slot)
        let routing = slot.startRouting()
        let token = try! DeviceToken(bytes: [UInt8](repeating: 1, count: 32))
        channel.push([
            .accepted(tag: Self.runA | 0), .accepted(tag: Self.runA | 1), .rejected(tag: Self.runB | 0, Rejection(token: token, reason: .badDeviceToken)),
            .accepted(tag: (9 << 32) | 0), .accepted(tag: Self.runA | 2),
        ])
        channel.push([.refused(tag: Self.runB | 1, token: token, ProviderRefusal(reason: .invalidProviderToken, status: 403, isOutage: false))])
        await channel.shutdown()
        await routing.value
        slot.unregister(Self.runA)
        slot.unregister(Self.runB)
        #expect(await a.value == [Self.runA | 0, Self.runA | 1, Self.runA | 2])
        #expect(await b.value == [Self.runB | 0, Self.runB | 1])
    }

    @Test func theChannelWritesUntilTheEarliestLeaseOfItsRunsAndNotAtAllWithoutOne() {
        let channel = InMemoryChannel()
        let slot = SlotContext(channel: channel)
        let start = ContinuousClock.now
        slot.setDeadline(start + .seconds(10), for: Self.runA)
        slot.setDeadline(start + .seconds(5), for: Self.runB)
        #expect(channel.deadlines.last == start + .seconds(5))
        slot.unregister(Self.runB)
        #expect(channel.deadlines.last == start + .seconds(10))
        slot.unregister(Self.runA)
        let none = channel.deadlines.last.flatMap { $0 }
        #expect(none != nil && none! <= ContinuousClock.now, "no run holds a lease: nothing may be written")
    }

    @Test func aHaltedChannelIsNeverGivenALaterDeadline() {
        let channel = InMemoryChannel()
        let slot = SlotContext(channel: channel)
        slot.setDeadline(.now + .seconds(60), for: Self.runA)
        slot.halt()
        let halted = channel.deadlines.count
        #expect(slot.isHalted)
        #expect(channel.deadlines.last.flatMap { $0 }.map { $0 <= ContinuousClock.now } == true)
        // A run renewing its lease after the halt changes nothing on the channel.
        slot.setDeadline(.now + .seconds(120), for: Self.runA)
        slot.unregister(Self.runA)
        #expect(channel.deadlines.count == halted)
    }

    @Test func repeatsAreReportedOnceAndThoseOfAnUnconfirmedCheckpointAgain() async {
        let channel = InMemoryChannel()
        let slot = SlotContext(channel: channel)
        channel.setTotals(resent: 5, retried: 2)
        var taken = await slot.takeRepeats(fresh: true)
        #expect(taken == (5, 2))
        taken = await slot.takeRepeats(fresh: true)
        #expect(taken == (0, 0))
        channel.setTotals(resent: 8, retried: 2)
        taken = await slot.takeRepeats(fresh: true)
        #expect(taken == (3, 0))
        // The checkpoint that carried them was never confirmed: the next one carries them.
        slot.returnRepeats(taken)
        taken = await slot.takeRepeats(fresh: false)
        #expect(taken == (3, 0))
    }
}
