import Glibc
public import NIOCore
import NIOPosix

/// The event loops of a worker's campaign connections: one per core, each thread at a lower CPU
/// priority (a higher nice value) than the rest of the process.
///
/// A campaign keeps its connections' loops busy for as long as it lasts; everything a doorbell
/// ring crosses (the lane's own loop, the lane's Redis client, the API, Redis, Postgres, the
/// gateway) wakes for moments. With both at the same priority, a ring's every step waits for the
/// campaign's slices on a saturated host; with the campaign's threads niced, the kernel runs a
/// waking step first, and the campaign still has every cycle nothing else wants. Lowering one's
/// own priority needs no privilege. Kept for the process's life, like NIO's singleton group.
public enum CampaignLoops {
    /// How much lower than the process the campaign loops run (nice +10: about a tenth of the
    /// weight of a thread at the process's priority when both want a core).
    public static let niceIncrement: Int32 = 10

    /// The main thread's nice value: the process's priority, whichever thread asks (threads
    /// inherit their creator's, and the runtime's own threads may differ).
    public static func processNiceValue() -> Int32 {
        getpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(getpid()))
    }

    public static let group: any EventLoopGroup = {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: System.coreCount)
        for loop in group.makeIterator() {
            // On Linux a thread's nice value is its own: PRIO_PROCESS with id 0 names the calling
            // thread, with the process id the main thread, whose value is the process's.
            try? loop.submit {
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, min(19, processNiceValue() + niceIncrement))
            }.wait()
        }
        return group
    }()
}
