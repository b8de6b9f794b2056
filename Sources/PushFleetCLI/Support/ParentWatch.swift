import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Opt-in: with `PUSHFLEET_EXIT_WITH_PARENT=1` the process ends with status 1 soon after its parent
/// died, so processes a test started do not outlive a killed test binary.
///
/// It polls `getppid()` every 500 ms rather than using `PR_SET_PDEATHSIG`, which fires when the
/// parent's *thread* that spawned the process ends, not the parent process.
enum ParentWatch {
    static let variable = "PUSHFLEET_EXIT_WITH_PARENT"

    /// Starts the watch if the environment asks for it; call once, at startup.
    static func startIfRequested() {
        guard ProcessInfo.processInfo.environment[Self.variable] == "1" else { return }
        let parent = getppid()
        let thread = Thread {
            while true {
                usleep(500_000)
                // Re-parented (to init or a subreaper): the parent is gone.
                if getppid() != parent { _exit(1) }
            }
        }
        thread.name = "pushfleet.parent-watch"
        thread.start()
    }
}
