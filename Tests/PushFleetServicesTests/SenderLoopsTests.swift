import APNSTransport
import Glibc
import NIOCore
import Testing

/// A worker's campaign connections run on loops whose threads yield the CPU to everything else in
/// the process (and on the host) that wants it: the doorbell lane's loop among them.
@Suite struct SenderLoopsTests {
    private static func niceValue() -> Int32 {
        getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
    }

    @Test func everyCampaignLoopRunsTenNiceStepsBelowTheProcess() throws {
        let process = SenderLoops.processNiceValue()
        let caller = Self.niceValue()
        let values = try SenderLoops.campaign.onEachThread { Self.niceValue() }
        #expect(values == Array(repeating: min(19, process + SenderLoops.niceIncrement), count: System.coreCount))
        // Other threads keep their own priority, the lane's among them.
        #expect(try SenderLoops.lane.onEachThread { Self.niceValue() } == [process])
        #expect(Self.niceValue() == caller)
        #expect(SenderLoops.processNiceValue() == process)
    }
}
