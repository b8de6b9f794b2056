public import APNSWire
public import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS

/// Reads the feedback service of the binary protocol: connect with the provider certificate, read
/// every tuple until the service closes. The service forgets what it sent, so call this once per
/// poll and keep the result.
public enum FeedbackClient {
    /// Connects to `host:port`, reads all tuples and returns them in the order sent.
    /// - Throws: ``TransportError`` if the service cannot be reached or the TLS handshake fails.
    public static func fetch(
        host: String,
        port: Int,
        tls: ClientTLS,
        serverHostname: String? = nil,
        timeout: TimeAmount = .seconds(30),
        eventLoop: any EventLoop
    ) async throws -> [FeedbackTuple] {
        let sslContext = try NIOSSLContext(configuration: try tls.makeConfiguration())
        let hostname = serverHostname ?? host
        let isIPAddress = (try? SocketAddress(ipAddress: hostname, port: 0)) != nil
        let done = eventLoop.makePromise(of: [FeedbackTuple].self)
        do {
            let channel = try await ClientBootstrap(group: eventLoop)
                .connectTimeout(.seconds(10))
                .channelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.addHandler(
                            try NIOSSLClientHandler(context: sslContext, serverHostname: isIPAddress ? nil : hostname)
                        )
                        try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(FeedbackTupleDecoder()))
                        try channel.pipeline.syncOperations.addHandler(TupleCollector(promise: done))
                    }
                }
                .connect(host: host, port: port)
                .get()
            let timer = eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
            defer { timer.cancel() }
            return try await done.futureResult.get()
        } catch let error as TransportError {
            throw error
        } catch {
            done.fail(error)
            throw TransportError.connectionFailed(host: host, port: port, underlying: error)
        }
    }

    private final class TupleCollector: ChannelInboundHandler {
        typealias InboundIn = FeedbackTuple
        private let promise: EventLoopPromise<[FeedbackTuple]>
        private var tuples: [FeedbackTuple] = []
        private var error: (any Error)?

        init(promise: EventLoopPromise<[FeedbackTuple]>) { self.promise = promise }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            self.tuples.append(self.unwrapInboundIn(data))
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // The service closes right after writing; a missing close_notify is not an error.
            if let sslError = error as? NIOSSLError, case .uncleanShutdown = sslError { return }
            self.error = self.error ?? error
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            if let error = self.error {
                self.promise.fail(error)
            } else {
                self.promise.succeed(self.tuples)
            }
        }
    }
}
