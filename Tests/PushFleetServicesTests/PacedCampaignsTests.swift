import Foundation
import Synchronization
import Testing

@testable import PushFleetServices

/// A throttled campaign shares a worker's slots (on an injected clock): once a read of it was
/// paced, picks prefer other campaigns, and a second slot holding it yields; a campaign paced
/// long ago, or held by one slot only, keeps its slots.
@Suite struct PacedCampaignsTests {
    final class Clock: Sendable {
        let instant = Mutex(ContinuousClock.now)
        func advance(_ by: Duration) { self.instant.withLock { $0 += by } }
        var now: ContinuousClock.Instant { self.instant.withLock { $0 } }
    }

    @Test func aPacedCampaignHeldBySeveralSlotsYieldsAndIsPickedLast() {
        let clock = Clock()
        let paced = PacedCampaigns { clock.now }
        let (throttled, other, third) = (UUID(), UUID(), UUID())
        paced.hold(throttled)
        // Not paced yet: nothing changes.
        #expect(paced.preferringUnpaced([throttled, other, third]) == [throttled, other, third])
        #expect(!paced.shouldYield(throttled))

        paced.paced(throttled)
        #expect(paced.preferringUnpaced([throttled, other, third]) == [other, third, throttled])
        #expect(!paced.shouldYield(throttled), "the only slot holding it keeps it")
        paced.hold(throttled)
        #expect(paced.shouldYield(throttled), "a second slot holding it gives it up")
        #expect(!paced.shouldYield(other))

        // Paced long ago: as any other campaign.
        clock.advance(PacedCampaigns.memory)
        #expect(!paced.shouldYield(throttled))
        #expect(paced.preferringUnpaced([throttled, other]) == [throttled, other])
    }

    @Test func aCampaignNoSlotHoldsAnyMoreIsForgotten() {
        let clock = Clock()
        let paced = PacedCampaigns { clock.now }
        let (throttled, other) = (UUID(), UUID())
        paced.hold(throttled)
        paced.hold(throttled)
        paced.paced(throttled)
        paced.release(throttled)
        #expect(paced.preferringUnpaced([throttled, other]) == [other, throttled], "one slot still paces it")
        #expect(!paced.shouldYield(throttled), "held by one slot only")
        paced.release(throttled)
        #expect(paced.preferringUnpaced([throttled, other]) == [throttled, other])
        // A release too many does not go below zero.
        paced.release(throttled)
        paced.hold(throttled)
        paced.paced(throttled)
        #expect(!paced.shouldYield(throttled))
    }
}
