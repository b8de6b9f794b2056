import Synchronization

/// APNs stalling, switched on and off while the simulator runs: while on, both gateways read and
/// record what they are sent but write no answer (HTTP/2 responses, binary error responses); when
/// it ends, each held answer goes out as it would have without the stall (at once, or once its
/// configured delay has passed). In-process through ``MockAPNSServer/stall``; from outside through
/// the admin endpoint (`POST /stall`, `DELETE /stall`).
///
/// A stall has no deadline: it is how a test holds a notification in flight for as long as it
/// needs (a worker stopped or killed with its answers unread), however loaded the machine is.
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

    /// Runs `answer` now when no stall is on, or when the stall ends.
    func afterward(_ answer: @escaping @Sendable () -> Void) {
        let now = self.state.withLock { state in
            guard state.isOn else { return true }
            state.held.append(answer)
            return false
        }
        if now { answer() }
    }
}
