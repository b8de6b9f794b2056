#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// Waiting for SIGTERM or SIGINT.
enum Signals {
    /// Returns when the process receives SIGTERM or SIGINT.
    static func waitForTermination() async throws {
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        let queue = DispatchQueue(label: "pushfleet.signals")
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumed = ResumeOnce(continuation)
            for number in [SIGTERM, SIGINT] {
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { resumed.resume() }
                source.resume()
                Self.keep.append(source)
            }
        }
    }

    // Signal sources live as long as the process.
    nonisolated(unsafe) private static var keep: [any DispatchSourceSignal] = []
}

/// Resumes a continuation at most once; only touched on the signal queue.
private final class ResumeOnce: @unchecked Sendable {
    // unchecked Sendable: every call comes from the one serial signal queue.
    private var continuation: CheckedContinuation<Void, Never>?
    init(_ continuation: CheckedContinuation<Void, Never>) { self.continuation = continuation }
    func resume() {
        self.continuation?.resume()
        self.continuation = nil
    }
}
