import APNSWire
import NIOCore
import NIOTLS

/// One HTTP/2 connection to APNs, right after the TLS handler: ``HTTP2ClientFramer`` makes and
/// reads the frames, ``HTTP2SenderCore`` decides. Everything written between two flushes leaves in
/// one TLS write; acknowledgements and credit leave at the end of the read that called for them,
/// with the requests the core wrote in it.
final class HTTP2ClientConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let core: HTTP2SenderCore
    private let connection: HTTP2Connection
    private var framer: HTTP2ClientFramer
    private var context: ChannelHandlerContext?
    /// Bytes read and not yet a whole frame.
    private var inbound = ByteBuffer()
    private var error: (any Error)?

    init(core: HTTP2SenderCore, connection: HTTP2Connection, authority: String, connectionWindow: Int, allocator: ByteBufferAllocator) {
        self.core = core
        self.connection = connection
        self.framer = HTTP2ClientFramer(authority: authority, receiveWindow: connectionWindow, allocator: allocator)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: - Writing, on the core's behalf

    /// Whether a request written now goes out whole (flow control: see ``HTTP2ClientFramer``), on
    /// a connection not already failed and closing (a request written then would only come back
    /// as lost, counted as a possible duplicate).
    var acceptsRequests: Bool { self.error == nil && self.framer.acceptsRequests }

    /// Writes one request; it leaves at ``flush()``.
    func writeRequest(streamID: Int32, notification: HTTP2Notification, authorization: String?) {
        self.framer.writeRequest(streamID: streamID, notification: notification, authorization: authorization)
    }

    /// Sends everything written so far in one TLS write.
    func flush() {
        guard let context = self.context, let bytes = self.framer.take() else { return }
        context.writeAndFlush(self.wrapOutboundOut(bytes), promise: nil)
    }

    func ping() {
        self.framer.ping()
        self.flush()
    }

    func close() {
        self.context?.close(promise: nil)
    }

    // MARK: - Events

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? TLSUserEvent, case .handshakeCompleted(let negotiated) = event {
            if negotiated == "h2" {
                self.framer.start()
                self.flush()
                self.core.connectionReady(self.connection, channel: context.channel, handler: self)
            } else {
                self.error = NotHTTP2(negotiated: negotiated)
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard self.error == nil else { return }
        var bytes = self.unwrapInboundIn(data)
        if self.inbound.readableBytes == 0 {
            self.inbound = bytes
        } else {
            self.inbound.writeBuffer(&bytes)
        }
        do {
            try self.framer.read(&self.inbound) { event in
                switch event {
                case .settings(let maxConcurrentStreams):
                    self.core.settingsReceived(self.connection, maxConcurrentStreams: maxConcurrentStreams)
                case .answered(let streamID, let status, let body):
                    self.core.answered(self.connection, streamID: streamID, status: status, body: body)
                case .reset(let streamID, let refused):
                    self.core.streamReset(self.connection, streamID: streamID, refused: refused)
                case .goAway(let lastStreamID, let errorCode, let debugData):
                    self.core.goAwayReceived(
                        self.connection, lastStreamID: lastStreamID, errorCode: HTTP2Wire.ErrorCode.name(errorCode), debugData: debugData
                    )
                case .pingAnswered:
                    self.core.pingAnswered(self.connection)
                }
            }
        } catch {
            // The peer broke the protocol: GOAWAY with the error, then close.
            self.error = error
            self.framer.fail(error)
            self.flush()
            context.close(promise: nil)
        }
        if self.inbound.readableBytes == 0 {
            self.inbound.clear()
        } else if self.inbound.readerIndex >= 1 << 16 {
            self.inbound.discardReadBytes()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        self.core.readComplete(self.connection)
        // After the core's own flush (if it wrote requests), only acknowledgements or credit.
        self.flush()
        context.fireChannelReadComplete()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { self.core.writable(self.connection) }
        context.fireChannelWritabilityChanged()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.core.connectionClosed(self.connection, error: self.error)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // TLS failures, a reset: the connection is done.
        self.error = self.error ?? error
        context.close(promise: nil)
    }
}

/// The server did not agree to HTTP/2 in the TLS handshake.
struct NotHTTP2: Error, CustomStringConvertible {
    let negotiated: String?
    var description: String { "the server did not negotiate HTTP/2 (ALPN: \(self.negotiated ?? "none"))" }
}

/// The connection closed before the TLS handshake completed, without an error of its own.
struct ClosedDuringHandshake: Error, CustomStringConvertible {
    var description: String { "closed during the TLS handshake" }
}
