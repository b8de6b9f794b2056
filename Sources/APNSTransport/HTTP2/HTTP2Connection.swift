import APNSWire
import NIOCore

/// One connection of an ``HTTP2Sender``'s pool, as its core sees it: its streams, its provider token
/// and its timers. Touched only on the sender's event loop.
final class HTTP2Connection {
    enum State {
        /// Waiting out a spacing or backoff delay, or for TCP connect and the TLS handshake.
        case connecting
        case ready(any Channel, HTTP2ClientConnectionHandler)
        case closed
    }

    /// The pool position this connection fills.
    let position: Int
    var state = State.connecting
    var window: HTTP2StreamWindow<HTTP2SenderCore.Pending>
    /// The provider token its requests carry, if any.
    var token: ProviderToken?
    /// Some answer (or SETTINGS) arrived on it: a later failure does not count as a failed attempt.
    var madeProgress = false
    /// Any frame read or written.
    var lastActivity = NIODeadline.now()
    /// When the connection became ready; nil before.
    var readyAt: NIODeadline?
    var pingSentAt: NIODeadline?
    var timer: RepeatedTask?

    init(position: Int, window: HTTP2StreamWindow<HTTP2SenderCore.Pending>) {
        self.position = position
        self.window = window
    }

    var isReady: Bool {
        if case .ready = self.state { return true }
        return false
    }
}
