public import APNSWire
public import NIOCore

extension HTTP2Sender {
    /// How an ``HTTP2Sender`` connects, authenticates and paces itself. Every default is stated with its unit.
    public struct Configuration: Sendable {
        /// How the provider proves who it is: a provider token or the TLS client certificate.
        public struct Authentication: Sendable {
            enum Base: Sendable {
                case providerToken(ProviderTokenSigner)
                case certificate
            }
            let base: Base

            /// `authorization: bearer <token>` on every request, the token shared by every connection
            /// of the process through `signer`. Use ``ClientTLS/noClientCertificate(trusting:)``.
            public static func providerToken(_ signer: ProviderTokenSigner) -> Self { Self(base: .providerToken(signer)) }
            /// The client certificate of ``Configuration/tls`` and no `authorization` header.
            public static let certificate = Self(base: .certificate)
        }

        /// APNs host (`api.push.apple.com`, `api.sandbox.push.apple.com`) or the simulator's.
        public var host: String
        /// Port. Defaults to 443 (APNs also listens on 2197).
        public var port: Int
        /// Client TLS: client certificate (or none) and extra trust roots. ALPN `h2` is added.
        public var tls: ClientTLS
        /// Name to verify the server's certificate against (and to send as SNI and `:authority`).
        /// Defaults to `host`.
        public var serverHostname: String?
        public var authentication: Authentication
        /// Connections kept open. Defaults to 1.
        public var connections: Int
        /// Time between opening two connections of the pool, so a fleet does not open them all at
        /// once (Apple: "spread out the time between opening each connection for a few seconds").
        /// Defaults to 2 seconds.
        public var connectionSpacing: TimeAmount
        /// How long a stream may wait for its answer; past it the connection is given up and its
        /// streams are sent again on another. Defaults to 10 seconds.
        public var requestTimeout: TimeAmount
        /// A connection with nothing in flight for this long sends a PING, so a silently dropped
        /// connection is found before it is needed. Defaults to 60 seconds.
        public var idlePingInterval: TimeAmount
        /// Attempts a notification may take before a retryable answer (429, 500, 503, expired
        /// provider token) or none (its stream reset, its connection lost) becomes its final
        /// outcome; past them APNs is taken to be failing. Defaults to 5.
        public var maximumAttempts: Int
        /// `send` suspends while this many notifications wait to be written. Defaults to 10,000.
        public var maximumQueued: Int
        /// Streams open at once on one connection, whatever the server allows. Defaults to 1000.
        public var maximumStreamsPerConnection: Int
        /// Consecutive 500 answers on one connection after which it is replaced. Defaults to 3.
        public var serverErrorLimit: Int
        /// The connection-level window kept open for answer bodies, in bytes; credit goes back in
        /// one `WINDOW_UPDATE` once half of it was read. Defaults to 1 MiB (about 30,000
        /// rejections' bodies); 65,535, HTTP/2's default, returns credit every thousand or so.
        public var connectionWindow: Int
        /// Time allowed for TCP connect, and again for the TLS handshake after it. Defaults to 10 seconds.
        public var connectTimeout: TimeAmount
        /// Delays between failing connection attempts. Defaults to 100 ms doubling to 30 s.
        public var reconnectBackoff: Backoff
        /// Delays before sending again after 500, 503 and the like. Defaults to 100 ms doubling to 10 s.
        public var retryBackoff: Backoff
        /// Delays before sending again to a token answered 429 `TooManyRequests`. Only that token
        /// waits. Defaults to 1 s doubling to 60 s.
        public var tooManyRequestsBackoff: Backoff
        /// Whether the connections are opened as soon as the sender is made, and opened again
        /// whenever one closes, with or without work: a notification that must go now never waits
        /// for a TLS handshake. Defaults to false (connections open when there is something to send).
        public var keepsConnectionsOpen = false
        /// The last stream id a connection uses before it is replaced: 2^31 - 1, the protocol's.
        /// Tests lower it.
        package var streamIDLimit: Int32 = .max

        public init(
            host: String,
            port: Int = 443,
            tls: ClientTLS,
            serverHostname: String? = nil,
            authentication: Authentication,
            connections: Int = 1,
            connectionSpacing: TimeAmount = .seconds(2),
            requestTimeout: TimeAmount = .seconds(10),
            idlePingInterval: TimeAmount = .seconds(60),
            maximumAttempts: Int = 5,
            maximumQueued: Int = 10_000,
            maximumStreamsPerConnection: Int = 1000,
            serverErrorLimit: Int = 3,
            connectionWindow: Int = 1 << 20,
            connectTimeout: TimeAmount = .seconds(10),
            reconnectBackoff: Backoff = Backoff(),
            retryBackoff: Backoff = Backoff(initial: 100_000_000, maximum: 10_000_000_000),
            tooManyRequestsBackoff: Backoff = Backoff(initial: 1_000_000_000, maximum: 60_000_000_000)
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.serverHostname = serverHostname
            self.authentication = authentication
            self.connections = max(1, connections)
            self.connectionSpacing = connectionSpacing
            self.requestTimeout = requestTimeout
            self.idlePingInterval = idlePingInterval
            self.maximumAttempts = max(1, maximumAttempts)
            self.maximumQueued = max(1, maximumQueued)
            self.maximumStreamsPerConnection = max(1, maximumStreamsPerConnection)
            self.serverErrorLimit = max(1, serverErrorLimit)
            self.connectionWindow = min(max(connectionWindow, HTTP2InboundWindow.protocolDefault), Int(Int32.max))
            self.connectTimeout = connectTimeout
            self.reconnectBackoff = reconnectBackoff
            self.retryBackoff = retryBackoff
            self.tooManyRequestsBackoff = tooManyRequestsBackoff
        }
    }

    /// Counters since the sender was made.
    public struct Statistics: Hashable, Sendable {
        public var accepted = 0
        public var rejected = 0
        /// Streams opened (requests written), re-sends included.
        public var requestsWritten = 0
        /// Answers that led to sending a notification again (429, 500, 503, expired provider token, reset streams).
        public var retries = 0
        /// The part of ``retries`` answered 429 `TooManyRequests`: only those tokens waited.
        public var tooManyRequests = 0
        /// Notifications written again because their connection ended before their answer
        /// (closed, timed out): APNs may have delivered them, so these may show twice.
        public var resentAfterConnectionLoss = 0
        /// Notifications written again because the server said it never processed them (above a
        /// GOAWAY's last stream id, or a refused stream). Not duplicates.
        public var resentUnprocessed = 0
        /// Notifications taken back unwritten by ``HTTP2Sender/withdraw(where:)``.
        public var withdrawn = 0
        /// GOAWAY frames received.
        public var goAways = 0
        /// The reason in the last GOAWAY's debug data, as APNs wrote it.
        public var lastGoAwayReason: String?
        /// TLS connections established (ALPN h2).
        public var connectionsOpened = 0
        /// Failed attempts to connect (TCP, TLS, or no h2).
        public var connectFailures = 0
        /// Connections retired on purpose: GOAWAY, expired provider token, repeated 500s.
        public var connectionsReplaced = 0
        /// Connections given up because a stream's answer or a PING's did not come in time.
        public var requestTimeouts = 0
        /// PING frames sent on idle connections.
        public var pings = 0
        /// Provider tokens signed by the signer this sender uses (shared with other senders).
        public var providerTokensSigned = 0

        public init() {}
    }
}
