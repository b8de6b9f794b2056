import APNSWire
import NIOTLS
import NIOCore

/// Serves one feedback-service connection: writes every pending tuple as soon as the connection is
/// up, with no request, then closes. The list is cleared by the read.
final class FeedbackServiceHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let store: FeedbackStore
    private let ledger: DeliveryLedger

    init(store: FeedbackStore, ledger: DeliveryLedger) {
        self.store = store
        self.ledger = ledger
    }

    func channelActive(context: ChannelHandlerContext) {
        self.ledger.recordConnection("feedback")
        context.fireChannelActive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Write only once TLS is up: the tuples leave the store when they are written.
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            let tuples = self.store.drain()
            var buffer = context.channel.allocator.buffer(capacity: tuples.count * 38)
            for tuple in tuples { tuple.write(into: &buffer) }
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.writeAndFlush(self.wrapOutboundOut(buffer)).whenComplete { _ in loopBound.value.close(promise: nil) }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // The service takes no commands; whatever a client writes is ignored.
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
