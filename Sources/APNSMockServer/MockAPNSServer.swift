public import Logging
public import NIOCore
import APNSWire
import NIOConcurrencyHelpers
import NIOHTTP1
import NIOPosix
import NIOSSL

/// The APNs simulator: binary gateway, feedback service, HTTP/2 provider API and admin endpoint,
/// sharing one ledger.
///
/// ```swift
/// let server = MockAPNSServer(configuration: configuration, group: MultiThreadedEventLoopGroup.singleton)
/// let ports = try await server.start()
/// defer { try? await server.shutdown() }
/// ```
public final class MockAPNSServer: Sendable {
    /// The ports the listeners are bound to; `nil` for a listener not configured.
    public struct BoundPorts: Hashable, Sendable {
        public var binary: Int?
        public var feedback: Int?
        public var admin: Int?
        public var http2: Int?
    }

    public let configuration: MockAPNSConfiguration
    public let ledger: DeliveryLedger
    public let feedback: FeedbackStore
    /// The configuration's refused tokens, filtered once for every connection.
    let refusedTokens: RefusedTokens
    /// An APNs outage the HTTP/2 gateway plays while it is on; off at start.
    public let outage = GatewayOutage()
    /// APNs holding every answer while it is on; off at start.
    public let stall = GatewayStall()
    private let group: any EventLoopGroup
    let logger: Logger
    private let channels = NIOLockedValueBox<[any Channel]>([])
    private let acceptedByGateway = AcceptedCounter()
    /// Request streams processed by the HTTP/2 gateway, for faults that fire every N of them.
    let http2Streams = AcceptedCounter()

    public init(
        configuration: MockAPNSConfiguration,
        group: any EventLoopGroup,
        ledger: DeliveryLedger = DeliveryLedger(),
        logger: Logger = Logger(label: "pushfleet.mock-apns")
    ) {
        self.configuration = configuration
        self.refusedTokens = RefusedTokens(configuration: configuration)
        self.group = group
        self.ledger = ledger
        self.feedback = FeedbackStore()
        self.logger = logger
    }

    /// Binds every configured listener and returns the ports they are bound to.
    /// - Throws: ``MockAPNSError`` if a TLS file cannot be read or a port cannot be bound.
    public func start() async throws -> BoundPorts {
        let sslContext = try Self.makeSSLContext(self.configuration.tls)
        var ports = BoundPorts()
        do {
            if let port = self.configuration.binaryPort {
                ports.binary = try await self.bind(port: port, what: "binary gateway") { channel in
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(BinaryNotificationDecoder()))
                    try channel.pipeline.syncOperations.addHandler(
                        BinaryGatewayHandler(
                            configuration: self.configuration,
                            refusedTokens: self.refusedTokens,
                            ledger: self.ledger,
                            feedback: self.feedback,
                            acceptedByGateway: self.acceptedByGateway,
                            stall: self.stall,
                            logger: self.logger
                        )
                    )
                }
            }
            if let port = self.configuration.feedbackPort {
                ports.feedback = try await self.bind(port: port, what: "feedback service", autoRead: true) { channel in
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: sslContext))
                    try channel.pipeline.syncOperations.addHandler(FeedbackServiceHandler(store: self.feedback, ledger: self.ledger))
                }
            }
            if let port = self.configuration.http2Port {
                ports.http2 = try await self.bindHTTP2(port: port)
            }
            if let port = self.configuration.adminPort {
                ports.admin = try await self.bind(port: port, what: "admin endpoint", autoRead: true) { channel in
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(AdminHTTPHandler(ledger: self.ledger, feedback: self.feedback, outage: self.outage, stall: self.stall))
                }
            }
        } catch {
            try? await self.shutdown()
            throw error
        }
        return ports
    }

    /// Closes the listeners. Connections already open are closed with them.
    public func shutdown() async throws {
        let channels = self.channels.withLockedValue { channels in
            defer { channels.removeAll() }
            return channels
        }
        for channel in channels {
            try? await channel.close()
        }
    }

    func bind(
        port: Int,
        what: String,
        autoRead: Bool = false,
        initializer: @escaping @Sendable (any Channel) throws -> Void
    ) async throws -> Int {
        let host = self.configuration.host
        let children = NIOLockedValueBox<[any Channel]>([])
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: self.group)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelOption(.autoRead, value: autoRead)
                // Connections take turns in small bites, as at APNs, where one connection's backlog
                // never holds up another's request: with NIO's defaults (4 reads of up to 64 KiB
                // a turn), each busy campaign connection cost a loop turn tens of milliseconds,
                // and a doorbell's request on an idle connection of the same loop waited 100-250 ms.
                .childChannelOption(.maxMessagesPerRead, value: 1)
                .childChannelOption(.recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 1024, initial: 4096, maximum: 16_384))
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try initializer(channel)
                        children.withLockedValue { $0.append(channel) }
                        channel.closeFuture.whenComplete { _ in
                            children.withLockedValue { $0.removeAll { $0 === channel } }
                        }
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch {
            throw MockAPNSError.cannotBind(what: what, host: host, port: port, underlying: error)
        }
        // Closing the listener closes the connections it accepted too.
        channel.closeFuture.whenComplete { _ in
            for child in children.withLockedValue({ $0 }) { child.close(promise: nil) }
        }
        self.channels.withLockedValue { $0.append(channel) }
        let bound = channel.localAddress?.port ?? port
        self.logger.info("mock-apns \(what) listening", metadata: ["host": "\(host)", "port": "\(bound)"])
        return bound
    }

    static func makeSSLContext(_ files: MockAPNSConfiguration.TLSFiles) throws -> NIOSSLContext {
        var tls = try Self.makeTLSConfiguration(files)
        // APNs requires a client certificate on the binary ports; hostnames do not apply to clients.
        tls.certificateVerification = .noHostnameVerification
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw MockAPNSError.unreadableTLSFile(what: "TLS identity (certificate and key do not match?)", path: files.privateKey, underlying: error)
        }
    }

    /// The simulator's identity, TLS 1.2 or later, trusting the client CA; verification is the caller's.
    static func makeTLSConfiguration(_ files: MockAPNSConfiguration.TLSFiles) throws -> TLSConfiguration {
        let chain: [NIOSSLCertificate]
        let key: NIOSSLPrivateKey
        do {
            chain = try NIOSSLCertificate.fromPEMFile(files.certificateChain)
        } catch {
            throw MockAPNSError.unreadableTLSFile(what: "certificate chain", path: files.certificateChain, underlying: error)
        }
        do {
            key = try NIOSSLPrivateKey(file: files.privateKey, format: .pem)
        } catch {
            throw MockAPNSError.unreadableTLSFile(what: "private key", path: files.privateKey, underlying: error)
        }
        let clientCA: [NIOSSLCertificate]
        do {
            clientCA = try NIOSSLCertificate.fromPEMFile(files.clientCA)
        } catch {
            throw MockAPNSError.unreadableTLSFile(what: "client CA", path: files.clientCA, underlying: error)
        }
        var tls = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        tls.minimumTLSVersion = .tlsv12
        tls.trustRoots = .certificates(clientCA)
        return tls
    }
}
