public import NIOCore
public import NIOPosix
import NIOConcurrencyHelpers

/// A TCP forwarder on a free loopback port in front of a server (Redis, Postgres), for playing that
/// server's outage to processes that connect through it: ``cut()`` closes every connection and
/// closes each new one at once, as a stopped server would; ``restore()`` forwards again.
public final class OutageProxy: Sendable {
    public let port: Int
    private let listener: any Channel
    private let state: NIOLockedValueBox<(isCut: Bool, connections: [ObjectIdentifier: any Channel])>

    private init(port: Int, listener: any Channel, state: NIOLockedValueBox<(isCut: Bool, connections: [ObjectIdentifier: any Channel])>) {
        self.port = port
        self.listener = listener
        self.state = state
    }

    /// Starts forwarding from a free port of 127.0.0.1 to `targetHost:targetPort`.
    public static func start(
        to targetHost: String = "127.0.0.1", port targetPort: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> OutageProxy {
        let state = NIOLockedValueBox<(isCut: Bool, connections: [ObjectIdentifier: any Channel])>((false, [:]))
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                let admitted = state.withLockedValue { state -> Bool in
                    guard !state.isCut else { return false }
                    state.connections[ObjectIdentifier(inbound)] = inbound
                    return true
                }
                guard admitted else { return inbound.close() }
                inbound.closeFuture.whenComplete { _ in _ = state.withLockedValue { $0.connections.removeValue(forKey: ObjectIdentifier(inbound)) } }
                return ClientBootstrap(group: inbound.eventLoop)
                    .connect(host: targetHost, port: targetPort)
                    .flatMap { outbound in
                        let registered = state.withLockedValue { state -> Bool in
                            guard !state.isCut else { return false }
                            state.connections[ObjectIdentifier(outbound)] = outbound
                            return true
                        }
                        guard registered else {
                            outbound.close(promise: nil)
                            return inbound.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
                        }
                        outbound.closeFuture.whenComplete { _ in _ = state.withLockedValue { $0.connections.removeValue(forKey: ObjectIdentifier(outbound)) } }
                        return outbound.pipeline.addHandler(Forwarder(partner: inbound)).flatMap {
                            inbound.pipeline.addHandler(Forwarder(partner: outbound))
                        }.map {
                            inbound.read()
                        }
                    }
                    .flatMapError { error in
                        inbound.close(promise: nil)
                        return inbound.eventLoop.makeSucceededVoidFuture()
                    }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return OutageProxy(port: listener.localAddress!.port!, listener: listener, state: state)
    }

    /// Closes every forwarded connection, and every new one as it arrives, until ``restore()``.
    public func cut() {
        let open = self.state.withLockedValue { state in
            state.isCut = true
            defer { state.connections.removeAll() }
            return Array(state.connections.values)
        }
        for channel in open { channel.close(promise: nil) }
    }

    /// Forwards new connections again.
    public func restore() {
        self.state.withLockedValue { $0.isCut = false }
    }

    /// Stops listening and closes every connection.
    public func stop() async {
        self.cut()
        try? await self.listener.close()
    }
}

/// Writes what one side reads to the other, and closes the other when one side closes.
private final class Forwarder: ChannelDuplexHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let partner: any Channel

    init(partner: any Channel) {
        self.partner = partner
    }

    func channelActive(context: ChannelHandlerContext) {
        context.read()
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        self.partner.writeAndFlush(self.unwrapInboundIn(data), promise: nil)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.read()
    }

    func channelInactive(context: ChannelHandlerContext) {
        self.partner.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
