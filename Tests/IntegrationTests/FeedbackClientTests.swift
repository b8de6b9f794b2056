import APNSTransport
import APNSWire
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import PushFleetCore
import PushFleetTestSupport
import Testing

/// The feedback client against a service that breaks off: the service forgets what it sent, so
/// every tuple read whole before the break is kept, and the break is reported beside them.
@Suite struct FeedbackClientTests {
    static func tuple(_ index: Int) -> FeedbackTuple {
        FeedbackTuple(timestamp: 1_700_000_000 + UInt32(index), token: TestTokens.token(index))
    }

    @Test func theTuplesBeforeACutAreKept() async throws {
        var bytes = ByteBuffer()
        for index in 1...2 { Self.tuple(index).write(into: &bytes) }
        var third = ByteBuffer()
        Self.tuple(3).write(into: &third)
        bytes.writeBytes(third.readableBytesView.prefix(20))  // the connection ends inside the third
        let read = try await Self.fetch(from: bytes)
        #expect(read.tuples == [Self.tuple(1), Self.tuple(2)])
        let failure = try #require(read.failure)
        #expect(failure.code == .incompleteRead)
        #expect(failure.description.contains("20 bytes of an incomplete feedback tuple"), "\(failure)")
    }

    @Test func theTuplesBeforeAMalformedOneAreKept() async throws {
        var bytes = ByteBuffer()
        Self.tuple(1).write(into: &bytes)
        bytes.writeMultipleIntegers(UInt32(1_700_000_000), UInt16(0))  // a tuple without a token
        Self.tuple(2).write(into: &bytes)
        let read = try await Self.fetch(from: bytes)
        #expect(read.tuples == [Self.tuple(1)])
        #expect(read.failure?.description.contains("0-byte token") == true, "\(String(describing: read.failure))")
    }

    @Test func aWholeAnswerHasNoFailure() async throws {
        var bytes = ByteBuffer()
        for index in 1...3 { Self.tuple(index).write(into: &bytes) }
        let read = try await Self.fetch(from: bytes)
        #expect(read.tuples == (1...3).map(Self.tuple))
        #expect(read.failure == nil)
    }

    /// A service whose certificate the client does not trust: nothing is read, and that is a
    /// failure to connect, not an empty answer.
    @Test func aFailedHandshakeIsAnError() async throws {
        var bytes = ByteBuffer()
        Self.tuple(1).write(into: &bytes)
        let error = await #expect(throws: TransportError.self) {
            _ = try await Self.fetch(from: bytes, trusting: [try TestCertificates.shared().clientCertificate])
        }
        #expect(error?.code == .connectionFailed)
    }

    /// Serves `bytes` once over TLS on loopback, as the feedback service does (write, close), and
    /// reads them with the client.
    static func fetch(from bytes: ByteBuffer, trusting roots: [String]? = nil) async throws -> FeedbackClient.Read {
        let certificates = try TestCertificates.shared()
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificates.serverCertificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: certificates.serverKey, format: .pem))
        )
        let context = try NIOSSLContext(configuration: tls)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(WriteOnceAndClose(bytes: bytes))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        defer { server.close(promise: nil) }
        return try await FeedbackClient.fetch(
            host: "127.0.0.1", port: server.localAddress!.port!, tls: .noClientCertificate(trusting: roots ?? [certificates.caCertificate]),
            serverHostname: "localhost", eventLoop: MultiThreadedEventLoopGroup.singleton.next()
        )
    }

    private final class WriteOnceAndClose: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let bytes: ByteBuffer
        init(bytes: ByteBuffer) { self.bytes = bytes }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if let event = event as? TLSUserEvent, case .handshakeCompleted = event {
                let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                context.writeAndFlush(self.wrapOutboundOut(self.bytes)).whenComplete { _ in bound.value.close(promise: nil) }
            }
            context.fireUserInboundEventTriggered(event)
        }
    }
}
