import Logging
import PostgresNIO
import Synchronization

/// Watches the connection that holds a leadership lock and reports, once, when it is gone: closed by
/// either side, a ping failed, or a ping went unanswered for ``muteIntervals`` check intervals (a
/// network that dropped silently).
///
/// Pings run in tasks of their own: a query on a half-dead connection may never return, and must not
/// hold up the leader. Closing the connection ends any ping still waiting.
struct LeadershipWatch: Sendable {
    /// How many check intervals a ping may go unanswered before the connection counts as lost: generous,
    /// because a busy server (a checkpoint, a vacuum) can be slow without being gone.
    static let muteIntervals = 5

    /// Yields why the connection is gone; finishes when the watch stops.
    let lost: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    private let pinger: Task<Void, Never>

    init(connection: PostgresConnection, interval: Duration, logger: Logger) {
        let (lost, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingOldest(1))
        connection.closeFuture.whenComplete { _ in continuation.yield("the connection was closed") }
        self.lost = lost
        self.continuation = continuation
        self.pinger = Task { await Self.ping(connection, every: interval, logger: logger, continuation) }
    }

    /// Stops pinging; any ping in flight ends when the connection closes.
    func stop() {
        self.pinger.cancel()
        self.continuation.finish()
    }

    private final class Pings: Sendable {
        /// When the last ping was answered, and whether one is in flight.
        let state = Mutex((answered: ContinuousClock.now, inFlight: false))
    }

    private static func ping(
        _ connection: PostgresConnection, every interval: Duration, logger: Logger, _ lost: AsyncStream<String>.Continuation
    ) async {
        let pings = Pings()
        while !Task.isCancelled {
            do { try await Task.sleep(for: interval) } catch { return }
            let (answered, inFlight) = pings.state.withLock { ($0.answered, $0.inFlight) }
            if ContinuousClock.now - answered > interval * Self.muteIntervals {
                lost.yield("no answer to a ping for \(ContinuousClock.now - answered)")
                return
            }
            if inFlight { continue }
            pings.state.withLock { $0.inFlight = true }
            Task {
                do {
                    try await connection.query("SELECT 1", logger: logger)
                    pings.state.withLock { $0 = (ContinuousClock.now, false) }
                } catch {
                    lost.yield("a ping failed")
                }
            }
        }
    }
}
