import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import PushFleetTestSupport

/// A TLS HTTP/2 server on loopback that answers each request as a test's script says: a status and
/// reason, a delay, no answer at all, a GOAWAY, new SETTINGS. For ``HTTP2Sender``'s tests only.
final class HTTP2ScriptedServer: Sendable {
    struct Request: Sendable {
        /// 0 for the first connection accepted, 1 for the next…
        let connection: Int
        let streamID: Int
        let headers: HPACKHeaders
        let body: ByteBuffer
        var path: String { self.headers.first(name: ":path") ?? "" }
        var token: String { String(self.path.dropFirst("/3/device/".count)) }
        var authorization: String? { self.headers.first(name: "authorization") }
    }

    enum Action: Sendable {
        /// Answers the request with `status` (and a JSON reason unless 200), after `delay`.
        case respond(status: Int, reason: String? = nil, timestamp: Int64? = nil, after: TimeAmount = .zero)
        /// Sends SETTINGS with a new stream limit, after `delay`.
        case settings(maxConcurrentStreams: Int, after: TimeAmount = .zero)
        /// Sends GOAWAY (NO_ERROR) with `{"reason": reason}` as debug data. Requests above
        /// `lastStreamID` get no answer.
        case goAway(lastStreamID: Int, reason: String)
        /// Resets the request's stream with `code`.
        case reset(HTTP2ErrorCode)
        /// Closes the connection, after `delay`.
        case close(after: TimeAmount = .zero)
    }

    typealias Script = @Sendable (Request) -> [Action]

    private struct State {
        var connections = 0
        var requests: [Request] = []
        var inFlight: [Int: Int] = [:]
        var peakInFlight: [Int: Int] = [:]
    }

    private let channel: any Channel
    private let state: NIOLockedValueBox<State>
    let port: Int

    /// Every request received, in order.
    var requests: [Request] { self.state.withLockedValue { $0.requests } }
    /// Connections accepted.
    var connections: Int { self.state.withLockedValue { $0.connections } }
    /// The most requests waiting for their answer at once, per connection.
    var peakInFlight: [Int: Int] { self.state.withLockedValue { $0.peakInFlight } }

    /// Starts a server.
    /// - Parameters:
    ///   - maxConcurrentStreams: the limit in the server's first SETTINGS frame.
    ///   - requireClientCertificate: verify a client certificate against the test CA.
    static func start(
        maxConcurrentStreams: Int = 100,
        requireClientCertificate: Bool = false,
        script: @escaping Script
    ) async throws -> HTTP2ScriptedServer {
        let certificates = try TestCertificates.shared()
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificates.serverCertificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: certificates.serverKey, format: .pem))
        )
        tls.applicationProtocols = ["h2"]
        if requireClientCertificate {
            tls.certificateVerification = .noHostnameVerification
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(certificates.caCertificate))
        }
        let sslContext = try NIOSSLContext(configuration: tls)
        let state = NIOLockedValueBox(State())
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let index = state.withLockedValue { state in
                        defer { state.connections += 1 }
                        return state.connections
                    }
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    try sync.addHandler(
                        NIOHTTP2Handler(
                            mode: .server,
                            initialSettings: [
                                HTTP2Setting(parameter: .maxConcurrentStreams, value: maxConcurrentStreams),
                                HTTP2Setting(parameter: .maxHeaderListSize, value: 8000),
                            ]
                        )
                    )
                    try sync.addHandler(ScriptedHandler(connection: index, state: state, script: script))
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return HTTP2ScriptedServer(channel: channel, state: state, port: channel.localAddress!.port!)
    }

    private init(channel: any Channel, state: NIOLockedValueBox<State>, port: Int) {
        self.channel = channel
        self.state = state
        self.port = port
    }

    func stop() async {
        try? await self.channel.close()
    }

    /// Reads requests and performs the script's actions for each.
    private final class ScriptedHandler: ChannelInboundHandler {
        typealias InboundIn = HTTP2Frame
        typealias OutboundOut = HTTP2Frame

        private let connection: Int
        private let state: NIOLockedValueBox<State>
        private let script: Script
        private var heads: [HTTP2StreamID: (HPACKHeaders, ByteBuffer)] = [:]
        private var goAwayLastStreamID = Int.max

        init(connection: Int, state: NIOLockedValueBox<State>, script: @escaping Script) {
            self.connection = connection
            self.state = state
            self.script = script
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = self.unwrapInboundIn(data)
            switch frame.payload {
            case .headers(let headers):
                self.heads[frame.streamID] = (headers.headers, ByteBuffer())
                if headers.endStream { self.complete(frame.streamID, context: context) }
            case .data(let data):
                guard var head = self.heads[frame.streamID] else { return }
                if case .byteBuffer(var bytes) = data.data { head.1.writeBuffer(&bytes) }
                self.heads[frame.streamID] = head
                if data.endStream { self.complete(frame.streamID, context: context) }
            default:
                break
            }
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            context.flush()
            context.fireChannelReadComplete()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            // Stream errors (say, a request above the GOAWAY's last stream id, sent before the
            // client read the GOAWAY) end only that stream; NIOHTTP2Handler closes on connection errors.
            context.fireErrorCaught(error)
        }

        private func complete(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
            guard let (headers, body) = self.heads.removeValue(forKey: streamID) else { return }
            let request = Request(connection: self.connection, streamID: Int(streamID), headers: headers, body: body)
            self.state.withLockedValue { state in
                state.requests.append(request)
                state.inFlight[self.connection, default: 0] += 1
                state.peakInFlight[self.connection] = max(state.peakInFlight[self.connection] ?? 0, state.inFlight[self.connection]!)
            }
            for action in self.script(request) {
                switch action {
                case .respond(let status, let reason, let timestamp, let delay):
                    if delay == .zero {
                        self.respond(streamID, status: status, reason: reason, timestamp: timestamp, context: context)
                    } else {
                        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                        context.eventLoop.scheduleTask(in: delay) {
                            let (handler, context) = bound.value
                            handler.respond(streamID, status: status, reason: reason, timestamp: timestamp, context: context)
                            context.flush()
                        }
                    }
                case .settings(let limit, let delay):
                    let settings: HTTP2Settings = [HTTP2Setting(parameter: .maxConcurrentStreams, value: limit)]
                    let frame = HTTP2Frame(streamID: .rootStream, payload: .settings(.settings(settings)))
                    if delay == .zero {
                        context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
                    } else {
                        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
                        context.eventLoop.scheduleTask(in: delay) {
                            let (handler, context) = bound.value
                            guard context.channel.isActive else { return }
                            context.writeAndFlush(handler.wrapOutboundOut(frame), promise: nil)
                        }
                    }
                case .goAway(let lastStreamID, let reason):
                    self.goAwayLastStreamID = lastStreamID
                    let frame = HTTP2Frame(
                        streamID: .rootStream,
                        payload: .goAway(lastStreamID: HTTP2StreamID(lastStreamID), errorCode: .noError, opaqueData: ByteBuffer(string: #"{"reason":"\#(reason)"}"#))
                    )
                    context.writeAndFlush(self.wrapOutboundOut(frame), promise: nil)
                case .reset(let code):
                    self.state.withLockedValue { $0.inFlight[self.connection, default: 1] -= 1 }
                    context.writeAndFlush(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(code))), promise: nil)
                case .close(let delay):
                    if delay == .zero {
                        context.close(promise: nil)
                    } else {
                        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
                        context.eventLoop.scheduleTask(in: delay) { bound.value.close(promise: nil) }
                    }
                }
            }
        }

        private func respond(_ streamID: HTTP2StreamID, status: Int, reason: String?, timestamp: Int64?, context: ChannelHandlerContext) {
            guard Int(streamID) <= self.goAwayLastStreamID, context.channel.isActive else { return }
            self.state.withLockedValue { $0.inFlight[self.connection, default: 1] -= 1 }
            var headers: HPACKHeaders = [":status": String(status), "apns-id": "00000000-0000-0000-0000-\(String(Int(streamID), radix: 10).leftPadded(12))"]
            guard status != 200 else {
                context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers, endStream: true)))), promise: nil)
                return
            }
            headers.add(name: "content-type", value: "application/json")
            var json = #"{"reason":"\#(reason ?? "")""#
            if let timestamp { json += #","timestamp":\#(timestamp)"# }
            json += "}"
            context.write(self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
            context.write(
                self.wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(ByteBuffer(string: json)), endStream: true)))),
                promise: nil
            )
        }
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        String(repeating: "0", count: max(0, width - self.count)) + self
    }
}
