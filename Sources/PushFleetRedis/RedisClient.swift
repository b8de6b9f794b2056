public import Logging
import NIOPosix
import Synchronization

/// A Redis connection usable from any task: one hiredis connection on its own thread.
///
/// hiredis blocks, so it never runs on the cooperative pool. Every ``withConnection(_:)`` call
/// hops to a one-thread `NIOThreadPool`, which runs the calls one at a time, in order of arrival,
/// against the same ``RedisConnection``. Several clients give several connections in parallel.
///
/// Call ``shutdown()`` when done; later calls throw ``RedisError/Code/clientShutDown``.
// unchecked Sendable because `connection` is touched only on the pool's single thread, inside
// work items that the pool runs one after another; the other stored properties are Sendable.
public final class RedisClient: @unchecked Sendable {
    /// The server this client talks to.
    public let configuration: RedisConfiguration
    private let threadPool: NIOThreadPool
    private let connection: RedisConnection
    private let isShutDown = Atomic<Bool>(false)

    /// Starts the client's thread. No connection is made until the first command.
    /// - Parameters:
    ///   - configuration: Where the server is; see ``RedisConfiguration``.
    ///   - logger: Receives connects (debug) and connection failures (warning). Default: label `pushfleet.redis`.
    public init(configuration: RedisConfiguration, logger: Logger = Logger(label: "pushfleet.redis")) {
        self.configuration = configuration
        self.connection = RedisConnection(configuration: configuration, logger: logger)
        self.threadPool = NIOThreadPool(numberOfThreads: 1)
        self.threadPool.start()
    }

    /// Runs `body` with the connection on the client's thread and returns its result.
    ///
    /// Batch the commands of one operation into one `body` (or one pipeline): each call is a thread hop.
    /// `body` must not keep the connection beyond the call.
    /// - Throws: What `body` throws; ``RedisError/Code/clientShutDown`` after ``shutdown()``;
    ///   `CancellationError` if the task was cancelled before `body` started.
    public func withConnection<T: Sendable>(_ body: @escaping @Sendable (RedisConnection) throws -> T) async throws -> T {
        // `body` is @escaping (though it never outlives this call) because the pool may release its
        // work item, which holds `body`, only after our continuation resumed: withoutActuallyEscaping
        // would trap on that race.
        let connection = UnsafeTransfer(self.connection)
        guard !self.isShutDown.load(ordering: .relaxed) else { throw self.shutDownError() }
        do {
            return try await self.threadPool.runIfActive { try body(connection.value) }
        } catch is NIOThreadPoolError.ThreadPoolInactive {
            throw self.shutDownError()
        } catch is CancellationError where self.isShutDown.load(ordering: .relaxed) {
            // A stopping pool drops queued work items as if they were cancelled.
            throw self.shutDownError()
        }
    }

    /// Closes the connection and stops the thread, after the calls already submitted have run.
    public func shutdown() async throws {
        guard !self.isShutDown.exchange(true, ordering: .relaxed) else { return }
        let connection = UnsafeTransfer(self.connection)
        _ = try? await self.threadPool.runIfActive { connection.value.close() }
        try await self.threadPool.shutdownGracefully()
    }
}

extension RedisClient {
    fileprivate func shutDownError() -> RedisError {
        RedisError(code: .clientShutDown, message: "the Redis client for \(self.configuration.server) was shut down")
    }
}

/// Carries the connection into the pool's work item. Sound only because that item runs on the
/// pool's single thread; see ``RedisClient``.
private struct UnsafeTransfer<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
