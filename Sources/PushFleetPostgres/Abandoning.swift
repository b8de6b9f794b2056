import PostgresNIO
import Synchronization

extension CampaignStore {
    /// How often a waiting operation looks whether its connection has closed.
    static let closedConnectionCheck = Duration.milliseconds(500)

    /// Runs `operation` in a task of its own and returns its result, but stops waiting, and throws,
    /// as soon as the calling task is cancelled or the connection `operation` names through its
    /// ``WatchedConnection`` has closed with the operation still unanswered.
    ///
    /// postgres-nio never answers a query written to a connection whose pipeline is already gone (a
    /// pooled connection leased just as the server went away), and such a query ignores
    /// cancellation; awaited directly, it would hold its caller, and a coordinator round with it,
    /// forever. Left behind, it costs one suspended task. So `operation` must be Postgres work only:
    /// nothing that must not outlive the call (a leader's body) belongs in it.
    /// - Parameters:
    ///   - what: the operation, for the error (`cannot use Postgres at host:port: …`).
    ///   - discard: called with the result of an operation that succeeded after the caller stopped
    ///     waiting (to close a connection it opened, for example).
    func abandoning<T: Sendable>(
        _ what: String, discard: @escaping @Sendable (T) async -> Void = { _ in },
        _ operation: @escaping @Sendable (WatchedConnection) async throws -> T
    ) async throws -> T {
        let outcome = FirstOutcome<T>()
        let watched = WatchedConnection()
        let work = Task {
            let result: Result<T, any Error>
            do { result = .success(try await operation(watched)) } catch { result = .failure(error) }
            if !outcome.settle(result), case .success(let late) = result { await discard(late) }
        }
        let endpoint = self.configuration.endpoint
        let watch = Task {
            // A query in flight when its connection closes fails at once; give that failure one
            // more check to arrive before calling the operation stuck.
            var closedChecks = 0
            while !Task.isCancelled {
                do { try await Task.sleep(for: Self.closedConnectionCheck) } catch { return }
                closedChecks = watched.isClosed ? closedChecks + 1 : 0
                if closedChecks == 2 {
                    outcome.settle(.failure(PostgresStoreError.connectionFailed(endpoint, "the connection closed while it was used to \(what)")))
                    return
                }
            }
        }
        defer { watch.cancel() }
        return try await withTaskCancellationHandler {
            try await outcome.value()
        } onCancel: {
            outcome.settle(.failure(CancellationError()))
            work.cancel()
        }
    }
}

/// The connection an abandonable operation is using, for the watch that gives up on it once closed.
final class WatchedConnection: Sendable {
    private let connection = Mutex<PostgresConnection?>(nil)

    /// From now on the operation waits on `connection`.
    func watch(_ connection: PostgresConnection) {
        self.connection.withLock { $0 = connection }
    }

    var isClosed: Bool { self.connection.withLock { $0?.isClosed ?? false } }
}

/// The first of several outcomes of one operation; later ones are ignored.
private final class FirstOutcome<T: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<T, any Error>?)
        case settled(Result<T, any Error>)
    }

    private let state = Mutex<State>(.waiting(nil))

    /// Settles the outcome unless it is settled already; returns whether this call settled it.
    @discardableResult
    func settle(_ result: Result<T, any Error>) -> Bool {
        let (settled, waiter) = self.state.withLock { state -> (Bool, CheckedContinuation<T, any Error>?) in
            guard case .waiting(let waiter) = state else { return (false, nil) }
            state = .settled(result)
            return (true, waiter)
        }
        waiter?.resume(with: result)
        return settled
    }

    /// Waits for the outcome.
    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let settled = self.state.withLock { state -> Result<T, any Error>? in
                switch state {
                case .waiting:
                    state = .waiting(continuation)
                    return nil
                case .settled(let result):
                    return result
                }
            }
            if let settled { continuation.resume(with: settled) }
        }
    }
}
