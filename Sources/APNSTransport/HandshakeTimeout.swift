import NIOCore
import NIOTLS

/// Closes a connection whose TLS handshake has not completed `timeout` after TCP connected: a
/// gateway that takes the connection and then says nothing (a firewall, a hung terminator) would
/// otherwise hold it connecting for ever, since the connect timeout covers TCP alone. The close
/// then counts as a failed connection, as a refused handshake does. Put it after the TLS handler.
final class HandshakeTimeout: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny

    private let timeout: TimeAmount
    private var timer: Scheduled<Void>?

    init(timeout: TimeAmount) {
        self.timeout = timeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { self.start(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        self.start(context: context)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.timer?.cancel()
        self.timer = nil
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        context.fireUserInboundEventTriggered(event)
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            self.timer?.cancel()
            self.timer = nil
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
    }

    private func start(context: ChannelHandlerContext) {
        guard self.timer == nil else { return }
        let timeout = self.timeout
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        self.timer = context.eventLoop.scheduleTask(in: timeout) {
            bound.value.fireErrorCaught(TLSHandshakeTimedOut(timeout: timeout))
            bound.value.close(promise: nil)
        }
    }
}

/// The TLS handshake did not complete in time.
struct TLSHandshakeTimedOut: Error, CustomStringConvertible {
    let timeout: TimeAmount
    var description: String { "the TLS handshake did not complete within \(self.timeout.nanoseconds / 1_000_000) ms" }
}
