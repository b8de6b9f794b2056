import APNSWire
import NIOCore
import NIOHPACK

/// One connection of an ``HTTP2Sender``'s pool, as its core sees it: its streams, its cached header
/// blocks and its timers. Touched only on the sender's event loop.
final class HTTP2Connection {
    enum State {
        /// Waiting out a spacing or backoff delay, or for TCP connect and the TLS handshake.
        case connecting
        case ready(any Channel, HTTP2ClientConnectionHandler)
        case closed
    }

    /// The pool position this connection fills.
    let slot: Int
    var state = State.connecting
    var window: HTTP2StreamWindow<HTTP2SenderCore.Pending>
    /// The provider token the cached headers carry, if any.
    var token: ProviderToken?
    /// `:method`, `:scheme`, `:authority` of ``cachedTemplate``.
    private var pseudoHeaders = HPACKHeaders()
    /// The template's headers, plus `authorization` for token authentication.
    private var headers = HPACKHeaders()
    private var cachedTemplate: HTTP2NotificationTemplate?
    /// Some answer (or SETTINGS) arrived on it: a later failure does not count as a failed attempt.
    var madeProgress = false
    /// Any frame read or written.
    var lastActivity = NIODeadline.now()
    /// When the connection became ready; nil before.
    var readyAt: NIODeadline?
    var pingSentAt: NIODeadline?
    var timer: RepeatedTask?

    init(slot: Int, window: HTTP2StreamWindow<HTTP2SenderCore.Pending>) {
        self.slot = slot
        self.window = window
    }

    var isReady: Bool {
        if case .ready = self.state { return true }
        return false
    }

    /// The header block of a request for `notification`, made of the cached stable part and `:path`.
    func requestHeaders(for notification: HTTP2Notification, authority: String) -> HPACKHeaders {
        if self.cachedTemplate != notification.template {
            self.cache(notification.template, authority: authority)
        }
        var headers = self.pseudoHeaders
        headers.reserveCapacity(self.pseudoHeaders.count + 1 + self.headers.count)
        // Per token: never indexed, so it does not push the stable headers out of APNs' small table.
        headers.add(name: ":path", value: HTTP2NotificationTemplate.path(for: notification.token), indexing: .nonIndexable)
        headers.add(contentsOf: self.headers)
        return headers
    }

    /// Uses `token` (or none) in the headers from now on.
    func use(token: ProviderToken?) {
        guard token != self.token else { return }
        self.token = token
        self.cachedTemplate = nil
    }

    private func cache(_ template: HTTP2NotificationTemplate, authority: String) {
        self.cachedTemplate = template
        self.pseudoHeaders = template.pseudoHeaders
        self.pseudoHeaders.add(name: ":authority", value: authority)
        self.headers = template.headers
        if let token = self.token {
            self.headers.add(name: "authorization", value: "bearer " + token.compact)
        }
    }
}
