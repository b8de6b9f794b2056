public import NIOCore
public import NIOHPACK
public import NIOHTTP2
import NIOConcurrencyHelpers
public import NIOPosix
public import NIOSSL

/// A test client for an HTTP/2 server that sends whatever header block it is given (validation is
/// off, so invalid requests go out as written) and reports what came back: status, headers and body
/// of each stream, RST_STREAM codes, every SETTINGS_MAX_CONCURRENT_STREAMS the server advertised,
/// and a GOAWAY with its debug data.
///
/// With `ignoreStreamLimit`, the client's own HTTP/2 stack is told the server allows 1000 streams,
/// whatever the server said, so that a test can open streams beyond the server's limit.
public final class RawHTTP2Client: Sendable {
    /// What the server answered on one stream.
    public struct Response: Sendable {
        public var streamID: Int?
        /// `:status`, `nil` if the stream ended without a response.
        public var status: Int?
        public var headers: HPACKHeaders
        public var body: String
        /// The RST_STREAM code (or GOAWAY refusal) that ended the stream, if any.
        public var resetCode: HTTP2ErrorCode?

        /// A response header's value.
        public func header(_ name: String) -> String? { self.headers.first(name: name) }
    }

    /// A GOAWAY the server sent.
    public struct GoAway: Hashable, Sendable {
        public var lastStreamID: Int
        public var errorCode: UInt32
        public var debugData: String
    }

    /// What the connection has seen at the frame level.
    private struct Observed {
        var maxConcurrentStreams: [Int] = []
        var goAways: [GoAway] = []
    }

    private let channel: any Channel
    private let multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<Void>
    private let observed: NIOLockedValueBox<Observed>

    private init(channel: any Channel, multiplexer: NIOHTTP2Handler.AsyncStreamMultiplexer<Void>, observed: NIOLockedValueBox<Observed>) {
        self.channel = channel
        self.multiplexer = multiplexer
        self.observed = observed
    }

    /// Connects over TLS with ALPN `h2` (added to `tls`).
    public static func connect(
        host: String = "127.0.0.1",
        port: Int,
        tls: TLSConfiguration,
        ignoreStreamLimit: Bool = false,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> RawHTTP2Client {
        var tls = tls
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        let observed = NIOLockedValueBox(Observed())
        var configuration = NIOHTTP2Handler.Configuration()
        configuration.connection.headerBlockValidation = .disabled
        configuration.connection.contentLengthValidation = .disabled
        let http2Configuration = configuration
        let (channel, multiplexer) = try await ClientBootstrap(group: group).connect(host: host, port: port) { channel in
            channel.eventLoop.makeCompletedFuture {
                let sync = channel.pipeline.syncOperations
                try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: nil))
                try sync.addHandler(ByteToMessageHandler(FrameObserver(observed: observed, ignoreStreamLimit: ignoreStreamLimit)))
                let multiplexer = try sync.configureAsyncHTTP2Pipeline(mode: .client, configuration: http2Configuration) { stream in
                    stream.eventLoop.makeSucceededVoidFuture()
                }
                return (channel, multiplexer)
            }
        }
        return RawHTTP2Client(channel: channel, multiplexer: multiplexer, observed: observed)
    }

    /// Every SETTINGS_MAX_CONCURRENT_STREAMS the server sent, in order.
    public var advertisedMaxConcurrentStreams: [Int] { self.observed.withLockedValue { $0.maxConcurrentStreams } }

    /// The GOAWAY the server sent, if any.
    /// The last GOAWAY the server sent, if any.
    public var goAway: GoAway? { self.goAways.last }
    /// Every GOAWAY the server sent, in order.
    public var goAways: [GoAway] { self.observed.withLockedValue { $0.goAways } }

    /// Completes when the connection is closed, by either side.
    public var closeFuture: EventLoopFuture<Void> { self.channel.closeFuture }

    /// Sends one request (HEADERS, then one DATA frame with END_STREAM if `body` is not `nil`) and
    /// waits for the answer.
    public func send(headers: [(String, String)], body: String?) async throws -> Response {
        let stream = try await self.open(headers: headers, endStream: body == nil)
        if let body { stream.finish(body: body) }
        return try await stream.response()
    }

    /// Opens a stream and sends its HEADERS, leaving it open unless `endStream`.
    public func open(headers: [(String, String)], endStream: Bool = false) async throws -> Stream {
        let (channel, response) = try await self.multiplexer.openStream { channel in
            channel.eventLoop.makeCompletedFuture {
                let collector = ResponseCollector(promise: channel.eventLoop.makePromise(of: Response.self))
                try channel.pipeline.syncOperations.addHandler(collector)
                return (channel, collector.promise.futureResult)
            }
        }
        let frame = HTTP2Frame.FramePayload.headers(.init(headers: HPACKHeaders(headers), endStream: endStream))
        try await channel.writeAndFlush(frame)
        // The stream has its identifier once its first frame is written.
        let streamID = try await channel.getOption(HTTP2StreamChannelOptions.streamID).get()
        return Stream(channel: channel, streamID: Int(streamID), response: response)
    }

    public func close() async {
        try? await self.channel.close()
    }

    /// One request stream.
    public struct Stream: Sendable {
        fileprivate let channel: any Channel
        fileprivate let responseFuture: EventLoopFuture<Response>
        public let streamID: Int

        fileprivate init(channel: any Channel, streamID: Int, response: EventLoopFuture<Response>) {
            self.channel = channel
            self.streamID = streamID
            self.responseFuture = response
        }

        /// Sends the body in one DATA frame with END_STREAM.
        public func finish(body: String) {
            let data = HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(ByteBuffer(string: body)), endStream: true))
            self.channel.writeAndFlush(data, promise: nil)  // a refused stream fails this; the response says why
        }

        /// The answer, once the stream has ended.
        public func response() async throws -> Response {
            var response = try await self.responseFuture.get()
            response.streamID = self.streamID
            return response
        }
    }

    /// Collects one stream's answer.
    private final class ResponseCollector: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame.FramePayload
        let promise: EventLoopPromise<Response>
        private var response = Response(streamID: nil, status: nil, headers: [:], body: "", resetCode: nil)

        init(promise: EventLoopPromise<Response>) { self.promise = promise }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch self.unwrapInboundIn(data) {
            case .headers(let headers):
                if self.response.status == nil {
                    self.response.headers = headers.headers
                    self.response.status = headers.headers.first(name: ":status").flatMap { Int($0) }
                }
                if headers.endStream { self.promise.succeed(self.response) }
            case .data(let data):
                if case .byteBuffer(let buffer) = data.data { self.response.body += String(buffer: buffer) }
                if data.endStream { self.promise.succeed(self.response) }
            default:
                break
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if let closed = error as? NIOHTTP2Errors.StreamClosed { self.response.resetCode = closed.errorCode }
        }

        func channelInactive(context: ChannelHandlerContext) {
            self.promise.succeed(self.response)  // ignored if the answer already completed it
        }
    }

    /// Passes the server's bytes on frame by frame, noting SETTINGS and GOAWAY, and optionally
    /// raising SETTINGS_MAX_CONCURRENT_STREAMS before the client's HTTP/2 stack sees it.
    private struct FrameObserver: NIOSingleStepByteToMessageDecoder {
        typealias InboundOut = ByteBuffer
        let observed: NIOLockedValueBox<Observed>
        let ignoreStreamLimit: Bool

        mutating func decode(buffer: inout ByteBuffer) throws -> ByteBuffer? {
            guard let (lengthHigh, lengthLow, type, flags) = buffer.getMultipleIntegers(at: buffer.readerIndex, as: (UInt8, UInt16, UInt8, UInt8).self)
            else { return nil }
            let length = Int(lengthHigh) << 16 | Int(lengthLow)
            guard var frame = buffer.readSlice(length: 9 + length) else { return nil }
            let payload = frame.readerIndex + 9
            if type == 4, flags & 1 == 0 {  // SETTINGS, not an ACK
                for offset in stride(from: payload, to: payload + length - 5, by: 6) where frame.getInteger(at: offset, as: UInt16.self) == 3 {
                    let value = Int(frame.getInteger(at: offset + 2, as: UInt32.self)!)
                    self.observed.withLockedValue { $0.maxConcurrentStreams.append(value) }
                    if self.ignoreStreamLimit { frame.setInteger(UInt32(1000), at: offset + 2) }
                }
            } else if type == 7, let (lastStreamID, errorCode) = frame.getMultipleIntegers(at: payload, as: (UInt32, UInt32).self) {
                let debugData = frame.getString(at: payload + 8, length: length - 8) ?? ""
                let goAway = GoAway(lastStreamID: Int(lastStreamID & 0x7FFF_FFFF), errorCode: errorCode, debugData: debugData)
                self.observed.withLockedValue { $0.goAways.append(goAway) }
            }
            return frame
        }

        mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> ByteBuffer? {
            try self.decode(buffer: &buffer)
        }
    }
}
