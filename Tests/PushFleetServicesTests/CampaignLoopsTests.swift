import Glibc
import NIOCore
import Testing

@testable import PushFleetServices

/// A worker's campaign connections run on loops whose threads yield the CPU to everything else in
/// the process (and on the host) that wants it: the doorbell lane's loop among them.
@Suite struct CampaignLoopsTests {
    private static func niceValue() -> Int32 {
        getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
    }

    @Test func everyCampaignLoopRunsTenNiceStepsBelowTheProcess() throws {
        let process = CampaignLoops.processNiceValue()
        let caller = Self.niceValue()
        var loops = 0
        for loop in CampaignLoops.group.makeIterator() {
            let nice = try loop.submit { Self.niceValue() }.wait()
            #expect(nice == min(19, process + CampaignLoops.niceIncrement))
            loops += 1
        }
        #expect(loops == System.coreCount)
        // Other threads keep their own priority.
        #expect(Self.niceValue() == caller)
        #expect(CampaignLoops.processNiceValue() == process)
    }
}
