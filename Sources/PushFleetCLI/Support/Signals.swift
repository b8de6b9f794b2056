#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Logging
import PushFleetServices

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

    /// Runs `body` until it returns. On SIGTERM or SIGINT, triggers `drain`; if `body` is still
    /// running `grace` later, cancels it; if it still runs another `grace` later (an await that
    /// ignores cancellation), logs that and exits with status 1, as an orchestrator's SIGKILL would.
    static func draining<T: Sendable>(
        _ drain: DrainSignal, grace: Duration, logger: Logger, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let work = Task { try await body() }
        let signals = Task {
            try await Self.waitForTermination()
            drain.trigger()
            try await Task.sleep(for: grace)
            logger.warning("still draining \(grace) after SIGTERM; cancelling")
            work.cancel()
            try await Task.sleep(for: grace)
            logger.error("did not stop \(grace * 2) after SIGTERM; exiting")
            exit(1)
        }
        defer { signals.cancel() }
        return try await work.value
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
