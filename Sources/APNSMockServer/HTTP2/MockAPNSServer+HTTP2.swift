import APNSWire
import NIOCore
import NIOHTTP2
import NIOSSL

extension MockAPNSServer {
    /// Binds the HTTP/2 provider API: TLS 1.2+, ALPN `h2`, client certificate optional.
    func bindHTTP2(port: Int) async throws -> Int {
        let sslContext = try Self.makeHTTP2SSLContext(self.configuration.tls)
        let keys = Dictionary(self.configuration.http2.providerKeys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
        var connection = NIOHTTP2Handler.ConnectionConfiguration()
        // The peer is told 1; the gateway handler, not NIOHTTP2Handler, enforces it (see StreamLimitRewriter).
        connection.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: StreamLimitRewriter.encode(1)),
            HTTP2Setting(parameter: .initialWindowSize, value: 65_535),
            HTTP2Setting(parameter: .maxFrameSize, value: 16_384),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 8_000),
        ]
        // A client pushing 100k requests/s past a stream limit errs far more often than a browser.
        var stream = NIOHTTP2Handler.StreamConfiguration()
        stream.streamErrorRateLimit.maximumCount = 1_000_000
        let connectionConfiguration = connection
        let streamConfiguration = stream
        return try await self.bind(port: port, what: "HTTP/2 provider API", autoRead: true) { channel in
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLServerHandler(context: sslContext))
            let coalescer = HTTP2WriteCoalescer()
            try sync.addHandler(coalescer)
            try sync.addHandler(StreamLimitRewriter())
            try sync.addHandler(NIOHTTP2Handler(mode: .server, connectionConfiguration: connectionConfiguration, streamConfiguration: streamConfiguration))
            try sync.addHandler(
                HTTP2GatewayHandler(
                    configuration: self.configuration,
                    keys: keys,
                    ledger: self.ledger,
                    gatewayStreams: self.http2Streams,
                    outage: self.outage,
                    coalescer: coalescer,
                    logger: self.logger
                )
            )
        }
    }

    static func makeHTTP2SSLContext(_ files: MockAPNSConfiguration.TLSFiles) throws -> NIOSSLContext {
        var tls = try Self.makeTLSConfiguration(files)
        // Token authentication sends no certificate; one that is sent must chain to the client CA.
        tls.certificateVerification = .optionalVerification
        tls.applicationProtocols = ["h2"]
        do {
            return try NIOSSLContext(configuration: tls)
        } catch {
            throw MockAPNSError.unreadableTLSFile(what: "TLS identity (certificate and key do not match?)", path: files.privateKey, underlying: error)
        }
    }
}
