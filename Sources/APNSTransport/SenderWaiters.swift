import DequeModule

/// The tasks waiting on a sender's core, and the back-pressure rule both protocols share: a
/// ``NotificationSender/send(_:)`` returns at once while fewer than the limit wait to be written,
/// and otherwise when enough of them were; a ``NotificationSender/flush()`` returns when the core
/// is idle. Lives on the core's event loop.
struct SenderWaiters {
    private var capacity: Deque<CheckedContinuation<Void, any Error>> = []
    private var flush: [CheckedContinuation<Void, Never>] = []
    /// How many notifications may wait to be written before ``send(_:)`` suspends.
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    /// A send whose notifications were just queued: resumed now if `waiting` is below the limit,
    /// else when ``resume(waiting:idle:)`` sees it fall below.
    mutating func admit(_ continuation: CheckedContinuation<Void, any Error>, waiting: Int) {
        if waiting < self.limit {
            continuation.resume()
        } else {
            self.capacity.append(continuation)
        }
    }

    /// A flush: resumed now if the core is `idle`, else when ``resume(waiting:idle:)`` finds it so.
    mutating func flush(_ continuation: CheckedContinuation<Void, Never>, idle: Bool) {
        if idle {
            continuation.resume()
        } else {
            self.flush.append(continuation)
        }
    }

    /// Whether a flush is waiting.
    var awaitsFlush: Bool { !self.flush.isEmpty }

    /// Resumes the sends if `waiting` fell below the limit, and the flushes if the core is `idle`
    /// (asked only when a flush waits: the cores call this after every write and read).
    mutating func resume(waiting: Int, idle: @autoclosure () -> Bool) {
        if waiting < self.limit {
            while let waiter = self.capacity.popFirst() { waiter.resume() }
        }
        if !self.flush.isEmpty && idle() {
            let waiters = self.flush
            self.flush.removeAll()
            for waiter in waiters { waiter.resume() }
        }
    }

    /// The sender shut down: every waiting send fails with `error`, every flush returns.
    mutating func close(_ error: any Error) {
        while let waiter = self.capacity.popFirst() { waiter.resume(throwing: error) }
        let waiters = self.flush
        self.flush.removeAll()
        for waiter in waiters { waiter.resume() }
    }
}
