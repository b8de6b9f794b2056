import NIOCore

extension EventLoop {
    /// Suspends the calling task until `body`, run on this loop, resumes the continuation it is given.
    /// The senders' calls use it to reach their loop-confined cores.
    func suspend<Result: Sendable>(_ body: @escaping @Sendable (CheckedContinuation<Result, Never>) -> Void) async -> Result {
        await withCheckedContinuation { continuation in
            self.execute { body(continuation) }
        }
    }
}
