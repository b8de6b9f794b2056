import APNSWire
import NIOCore
import NIOSSL

extension MockAPNSServer {
    /// Binds the HTTP/2 provider API: TLS 1.2+, ALPN `h2`, client certificate optional.
    func bindHTTP2(port: Int) async throws -> Int {
        let sslContext = try Self.makeHTTP2SSLContext(self.configuration.tls)
        let keys = Dictionary(self.configuration.http2.providerKeys.map { ($0.keyID, $0) }, uniquingKeysWith: { _, last in last })
        return try await self.bind(port: port, what: "HTTP/2 provider API", autoRead: true) { channel in
            let sync = channel.pipeline.syncOperations
            try sync.addHandler(NIOSSLServerHandler(context: sslContext))
            try sync.addHandler(
                HTTP2GatewayHandler(
                    configuration: self.configuration,
                    refusedTokens: self.refusedTokens,
                    keys: keys,
                    ledger: self.ledger,
                    gatewayStreams: self.http2Streams,
                    outage: self.outage,
                    stall: self.stall,
                    logger: self.logger,
                    allocator: channel.allocator
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
