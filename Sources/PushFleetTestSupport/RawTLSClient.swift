public import NIOCore
public import NIOPosix
public import NIOSSL

/// A test client that writes raw bytes over TLS and collects every byte the server sends until it
/// closes: for checking a gateway's answers byte by byte.
public enum RawTLSClient {
    /// Connects, writes `bytes`, and returns what the server wrote before closing (or before
    /// `timeout`, after which the connection is closed by us). The timeout only guards against a
    /// server that never closes; it is long because a loaded machine (the suites run in parallel on
    /// two cores) has been seen to take more than 10 s over a handshake and an answer.
    public static func exchange(
        host: String = "127.0.0.1",
        port: Int,
        tls: TLSConfiguration,
        bytes: ByteBuffer,
        timeout: TimeAmount = .seconds(60),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> ByteBuffer {
        let sslContext = try NIOSSLContext(configuration: tls)
        let collector = NIOLoopBoundBox<ByteBuffer?>.makeEmptyBox(eventLoop: group.any())
        let eventLoop = collector.eventLoop
        let received = eventLoop.makePromise(of: ByteBuffer.self)
        let channel = try await ClientBootstrap(group: eventLoop)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: nil))
                    try channel.pipeline.syncOperations.addHandler(CollectingHandler(promise: received))
                }
            }
            .connect(host: host, port: port)
            .get()
        let timer = eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        defer { timer.cancel() }
        channel.writeAndFlush(bytes, promise: nil)
        return try await received.futureResult.get()
    }

    private final class CollectingHandler: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        private let promise: EventLoopPromise<ByteBuffer>
        private var buffer = ByteBuffer()

        init(promise: EventLoopPromise<ByteBuffer>) { self.promise = promise }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var chunk = self.unwrapInboundIn(data)
            self.buffer.writeBuffer(&chunk)
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.promise.succeed(self.buffer)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // An unclean shutdown after the server's close still ends the exchange normally.
            if let error = error as? NIOSSLError, case .uncleanShutdown = error { return }
            self.promise.fail(error)
            context.close(promise: nil)
        }
    }
}
