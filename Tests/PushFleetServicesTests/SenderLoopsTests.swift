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

    /// The worker says when Linux groups its CPU time by session: on, in the root CPU cgroup
    /// (cgroup v1's `cpu` controller, or v2's single hierarchy). Off, or in a cgroup of its own
    /// (a systemd service, a container's), it says nothing.
    @Test func theCaveatNamesSessionGroupingOnlyWhereItApplies() {
        let v1Root = "9:name=systemd:/\n4:memory:/api/1\n2:cpuacct:/\n1:cpu:/\n0::/\n"
        let v1Service = "4:cpu,cpuacct:/system.slice/pushfleet-worker.service\n0::/\n"
        let v2Root = "0::/\n"
        let v2Service = "0::/system.slice/pushfleet-worker.service\n"
        #expect(SenderLoops.priorityCaveat(autogroup: "1\n", cgroups: v1Root)?.contains("kernel.sched_autogroup_enabled is 1") == true)
        #expect(SenderLoops.priorityCaveat(autogroup: "1\n", cgroups: v2Root) != nil)
        #expect(SenderLoops.priorityCaveat(autogroup: "0\n", cgroups: v1Root) == nil)
        #expect(SenderLoops.priorityCaveat(autogroup: nil, cgroups: v2Root) == nil)
        #expect(SenderLoops.priorityCaveat(autogroup: "1\n", cgroups: v1Service) == nil)
        #expect(SenderLoops.priorityCaveat(autogroup: "1\n", cgroups: v2Service) == nil)
        #expect(SenderLoops.priorityCaveat(autogroup: "1\n", cgroups: nil) == nil)
    }
}
