import APNSWire
import NIOCore

/// One connection of an ``HTTP2Sender``'s pool, as its core sees it: its place in the pool, its
/// streams, its provider token and its timer. Touched only on the sender's event loop.
final class HTTP2Connection {
    /// What the pool's decisions know of it: position, phase, progress, liveness.
    var member: HTTP2ConnectionPool.Member
    var window: HTTP2StreamWindow<HTTP2SenderCore.Pending>
    /// The channel and its handler, once ready; `nil` before and after.
    var open: (channel: any Channel, handler: HTTP2ClientConnectionHandler)?
    /// The provider token its requests carry, if any.
    var token: ProviderToken?
    var timer: RepeatedTask?

    init(member: HTTP2ConnectionPool.Member, window: HTTP2StreamWindow<HTTP2SenderCore.Pending>) {
        self.member = member
        self.window = window
    }

    var position: Int { self.member.position }
}
