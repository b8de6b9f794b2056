public import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
public import Prometheus

/// Plain HTTP for operators and orchestrators: `GET /metrics` (Prometheus text), `GET /healthz`
/// (the process answers) and `GET /readyz` (its dependencies answer; 503 with what is wrong
/// otherwise). Nothing else; no request body is read.
public final class ObservabilityServer: Sendable {
    /// The address it listens on; the port is the one bound (useful after asking for port 0).
    public let host: String
    public let port: Int
    private let channel: any Channel

    private init(host: String, port: Int, channel: any Channel) {
        self.host = host
        self.port = port
        self.channel = channel
    }

    /// Listens on `host:port`. `beforeScrape` runs before each `/metrics` answer, to set gauges
    /// that are read rather than counted.
    public static func start(
        host: String, port: Int, registry: PrometheusCollectorRegistry, readiness: Readiness,
        beforeScrape: (@Sendable () async -> Void)? = nil, logger: Logger
    ) async throws -> ObservabilityServer {
        let endpoints = Endpoints(registry: registry, readiness: readiness, beforeScrape: beforeScrape)
        let channel: any Channel
        do {
            channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 64)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        try channel.pipeline.syncOperations.addHandler(ObservabilityHandler(endpoints: endpoints))
                    }
                }
                .bind(host: host, port: port)
                .get()
        } catch {
            throw ObservabilityError.cannotListen(host: host, port: port, underlying: "\(error)")
        }
        let bound = channel.localAddress?.port ?? port
        logger.info("metrics and health listening", metadata: ["address": "\(host):\(bound)", "paths": "/metrics /healthz /readyz"])
        return ObservabilityServer(host: host, port: bound, channel: channel)
    }

    public func close() async {
        try? await self.channel.close()
    }
}

public enum ObservabilityError: Error, CustomStringConvertible {
    case cannotListen(host: String, port: Int, underlying: String)

    public var description: String {
        switch self {
        case .cannotListen(let host, let port, let underlying):
            "cannot listen for metrics and health on \(host):\(port): \(underlying)"
        }
    }
}

/// What each path answers.
struct Endpoints: Sendable {
    let registry: PrometheusCollectorRegistry
    let readiness: Readiness
    let beforeScrape: (@Sendable () async -> Void)?

    struct Answer: Sendable {
        var status: HTTPResponseStatus
        var contentType: String
        var body: [UInt8]
    }

    func answer(method: HTTPMethod, path: String) async -> Answer {
        guard method == .GET || method == .HEAD else {
            return Answer(status: .methodNotAllowed, contentType: "text/plain; charset=utf-8", body: Array("only GET and HEAD\n".utf8))
        }
        switch path {
        case "/metrics":
            // Gauges read from elsewhere (Postgres) are refreshed within 2 s, or served as they were.
            if let refresh = self.beforeScrape { await Readiness.first(refresh, orAfter: .seconds(2), ()) }
            var body: [UInt8] = []
            body.reserveCapacity(16_384)
            self.registry.emit(into: &body)
            return Answer(status: .ok, contentType: "text/plain; version=0.0.4; charset=utf-8", body: body)
        case "/healthz":
            return Answer(status: .ok, contentType: "text/plain; charset=utf-8", body: Array("ok\n".utf8))
        case "/readyz":
            let report = await self.readiness.evaluate()
            return Answer(
                status: report.isReady ? .ok : .serviceUnavailable, contentType: "application/json", body: Array((report.json + "\n").utf8)
            )
        default:
            return Answer(
                status: .notFound, contentType: "text/plain; charset=utf-8",
                body: Array("unknown path \(path); try /metrics, /healthz or /readyz\n".utf8)
            )
        }
    }
}

final class ObservabilityHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let endpoints: Endpoints
    private var head: HTTPRequestHead?

    init(endpoints: Endpoints) {
        self.endpoints = endpoints
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch self.unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head = self.head else { return }
            self.head = nil
            let path = String(head.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
            let endpoints = self.endpoints
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask { await endpoints.answer(method: head.method, path: path) }.whenSuccess { answer in
                let (handler, context) = bound.value
                handler.write(answer, to: head, context: context)
            }
        }
    }

    private func write(_ answer: Endpoints.Answer, to request: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        headers.add(name: "content-type", value: answer.contentType)
        headers.add(name: "content-length", value: String(answer.body.count))
        let keepAlive = request.isKeepAlive
        if !keepAlive { headers.add(name: "connection", value: "close") }
        context.write(self.wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: answer.status, headers: headers))), promise: nil)
        if request.method != .HEAD {
            context.write(self.wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: answer.body)))), promise: nil)
        }
        let bound = NIOLoopBound(context, eventLoop: context.eventLoop)
        context.writeAndFlush(self.wrapOutboundOut(.end(nil))).whenComplete { _ in
            if !keepAlive { bound.value.close(promise: nil) }
        }
    }
}
