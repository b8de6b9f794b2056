import NIOCore
import Synchronization

/// APNs stalling, switched on and off while the simulator runs: while on, both gateways read and
/// record what they are sent but write no answer (HTTP/2 responses, binary error responses); when
/// it ends, each held answer goes out as it would have without the stall (at once, or once its
/// configured delay has passed). In-process through ``MockAPNSServer/stall``; from outside through
/// the admin endpoint (`POST /stall`, `DELETE /stall`).
///
/// A stall has no deadline of its own; a client has: a sender that waits longer than its own
/// timeout for an answer gives the connection up, and the answers held for it go nowhere. A test
/// uses a stall to hold a notification in flight while it acts on the worker (stops or kills it
/// with its answers unread), however long a loaded machine takes to get there.
public final class GatewayStall: Sendable {
    private struct State {
        var isOn = false
        var held: [@Sendable () -> Void] = []
    }

    private let state = Mutex(State())

    public init() {}

    /// Whether answers are held now.
    public var isOn: Bool { self.state.withLock { $0.isOn } }

    /// Starts holding answers.
    public func begin() {
        self.state.withLock { $0.isOn = true }
    }

    /// Stops holding answers and lets the held ones go, in the order they were held.
    public func end() {
        let held = self.state.withLock { state in
            state.isOn = false
            defer { state.held.removeAll() }
            return state.held
        }
        for answer in held { answer() }
    }

    /// Runs `task` on `eventLoop` at `deadline`, or once the stall ends if that is later.
    func schedule(on eventLoop: any EventLoop, at deadline: NIODeadline, _ task: @escaping @Sendable () -> Void) {
        self.afterward { eventLoop.scheduleTask(deadline: deadline, task) }
    }

    /// Runs `answer` now when no stall is on, or when the stall ends.
    private func afterward(_ answer: @escaping @Sendable () -> Void) {
        let now = self.state.withLock { state in
            guard state.isOn else { return true }
            state.held.append(answer)
            return false
        }
        if now { answer() }
    }
}
