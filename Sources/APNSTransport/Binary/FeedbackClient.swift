public import APNSWire
public import NIOCore
import NIOConcurrencyHelpers
import NIOPosix
import NIOSSL
import NIOTLS

/// Reads the feedback service of the binary protocol: connect with the provider certificate, read
/// every tuple until the service closes. The service forgets what it sent, so call this once per
/// poll and keep the result, all of it: the tuples read before a failure included.
public enum FeedbackClient {
    /// What one read of the service gave.
    public struct Read: Sendable {
        /// Every tuple read whole, in the order sent.
        public var tuples: [FeedbackTuple]
        /// What ended the read before the service closed, if anything did (a malformed or cut
        /// tuple, a lost connection, the timeout); ``tuples`` holds what came before it.
        public var failure: TransportError?
    }

    /// Connects to `host:port` and reads all tuples.
    /// - Throws: ``TransportError`` if the service cannot be reached or the TLS handshake fails.
    public static func fetch(
        host: String,
        port: Int,
        tls: ClientTLS,
        serverHostname: String? = nil,
        timeout: TimeAmount = .seconds(30),
        eventLoop: any EventLoop
    ) async throws -> Read {
        let sslContext = try NIOSSLContext(configuration: try tls.makeConfiguration())
        let hostname = serverHostname ?? host
        let isIPAddress = (try? SocketAddress(ipAddress: hostname, port: 0)) != nil
        let done = eventLoop.makePromise(of: TupleCollector.Collected.self)
        let timedOut = NIOLockedValueBox(false)
        let collected: TupleCollector.Collected
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
            let timer = eventLoop.scheduleTask(in: timeout) {
                timedOut.withLockedValue { $0 = true }
                channel.close(promise: nil)
            }
            defer { timer.cancel() }
            collected = try await done.futureResult.get()
        } catch let error as TransportError {
            throw error
        } catch {
            done.fail(error)
            throw TransportError.connectionFailed(host: host, port: port, underlying: error)
        }
        let cause = collected.error.map { "\($0)" } ?? (timedOut.withLockedValue { $0 } ? "still sending after \(timeout.nanoseconds / 1_000_000_000) s" : nil)
        return Read(
            tuples: collected.tuples,
            failure: cause.map { TransportError.incompleteRead(host: host, port: port, what: "the feedback service", underlying: $0) }
        )
    }

    /// Keeps every tuple, and at the close hands them over with the error that ended the read
    /// early, if one did. A connection that never completed its TLS handshake read nothing: that
    /// is a failure to connect.
    private final class TupleCollector: ChannelInboundHandler {
        typealias InboundIn = FeedbackTuple
        struct Collected: Sendable {
            var tuples: [FeedbackTuple]
            var error: (any Error)?
        }

        private let promise: EventLoopPromise<Collected>
        private var tuples: [FeedbackTuple] = []
        private var error: (any Error)?
        private var handshakeCompleted = false

        init(promise: EventLoopPromise<Collected>) { self.promise = promise }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let event = event as? TLSUserEvent, case .handshakeCompleted = event { self.handshakeCompleted = true }
            context.fireUserInboundEventTriggered(event)
        }

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
            guard self.handshakeCompleted else {
                self.promise.fail(self.error ?? ClosedDuringHandshake())
                return
            }
            self.promise.succeed(Collected(tuples: self.tuples, error: self.error))
        }
    }
}
