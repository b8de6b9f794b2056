import APNSWire
import NIOCore
import NIOTLS

/// Translates one binary connection's events for ``BinarySenderCore``: TLS up, error response,
/// writability, close. Decides nothing itself.
final class BinaryConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = BinaryErrorResponse

    private let core: BinarySenderCore
    private let generation: Int
    private var error: (any Error)?

    init(core: BinarySenderCore, generation: Int) {
        self.core = core
        self.generation = generation
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
            self.core.connectionReady(context.channel, generation: self.generation)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.core.errorResponse(self.unwrapInboundIn(data), generation: self.generation)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.core.writabilityChanged(generation: self.generation) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.core.connectionClosed(generation: self.generation, error: self.error)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures, a reset, or bytes that are not an error response: the connection is done.
        self.error = self.error ?? error
        context.close(promise: nil)
    }
}
