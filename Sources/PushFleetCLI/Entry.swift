import Dispatch
import Foundation

/// The process's entry point: ``PushFleet/main()`` runs as a task, as an async `main` would run
/// it, while the main thread serves the main queue (`dispatchMain`).
///
/// With `PUSHFLEET_SYNC_MAIN=1` the main thread waits for the task instead of handing itself to
/// Dispatch. Nothing in PushFleet uses the main queue, so the program is the same; what differs is
/// that Debian 12's valgrind (3.19) can run it: it stops with an internal SIGSEGV in
/// `_dispatch_sig_thread` once the main thread calls `dispatchMain`. `scripts/bench-http2-sender.sh`
/// counts instructions under `valgrind --tool=callgrind` this way.
@main
enum Entry {
    static func main() {
        let waits = ProcessInfo.processInfo.environment["PUSHFLEET_SYNC_MAIN"] == "1"
        let finished = DispatchSemaphore(value: 0)
        Task.detached {
            await PushFleet.main()
            if waits { finished.signal() } else { exit(0) }
        }
        if waits {
            finished.wait()
            exit(0)
        }
        dispatchMain()
    }
}
