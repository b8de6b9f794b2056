public import NIOCore
public import PushFleetCore

/// Everything the simulator needs to know. Every default is stated with its unit.
public struct MockAPNSConfiguration: Sendable {
    /// Files of the simulator's TLS identity and of the CA that signs acceptable client certificates.
    public struct TLSFiles: Sendable {
        /// PEM certificate chain the simulator presents.
        public var certificateChain: String
        /// PEM private key of that certificate.
        public var privateKey: String
        /// PEM CA certificate(s) that client certificates must chain to.
        public var clientCA: String

        public init(certificateChain: String, privateKey: String, clientCA: String) {
            self.certificateChain = certificateChain
            self.privateKey = privateKey
            self.clientCA = clientCA
        }
    }

    /// Faults the binary gateway injects on purpose.
    public struct BinaryFaults: Sendable, Hashable {
        /// Every this many notifications accepted by the gateway (counted across all connections),
        /// close the connection that carried the last one without a word; whatever else arrives on
        /// it is lost. `nil` (the default) never does.
        public var dropEvery: Int?
        /// Every this many notifications accepted by the gateway (counted across all connections),
        /// answer status 10 (Shutdown) naming the last one, then close; whatever else arrives on the
        /// connection is discarded. `nil` (the default) never does.
        public var shutdownEvery: Int?
        /// Accept at most this many notifications per second on each connection by reading no faster.
        /// `nil` (the default) reads as fast as data arrives.
        public var ratePerConnection: Int?

        public init(dropEvery: Int? = nil, shutdownEvery: Int? = nil, ratePerConnection: Int? = nil) {
            self.dropEvery = dropEvery
            self.shutdownEvery = shutdownEvery
            self.ratePerConnection = ratePerConnection
        }
    }

    /// Address to listen on. Defaults to 127.0.0.1.
    public var host: String
    /// Binary gateway port; 0 picks a free port. Defaults to 2195.
    public var binaryPort: Int?
    /// Feedback service port; 0 picks a free port. Defaults to 2196.
    public var feedbackPort: Int?
    /// Plain-HTTP admin port serving `/stats` and `/reset`; 0 picks a free port. Defaults to 8195.
    public var adminPort: Int?
    /// HTTP/2 provider API port (TLS, ALPN `h2`, client certificate optional); 0 picks a free port.
    /// Defaults to `nil`: not served.
    public var http2Port: Int?
    public var tls: TLSFiles
    /// Tokens answered with status 8 (InvalidToken) by the binary gateway, 400 `BadDeviceToken` by HTTP/2.
    public var invalidTokens: Set<DeviceToken>
    /// Tokens the binary gateway accepts and then the feedback service reports; HTTP/2 answers them
    /// 410 `Unregistered`.
    public var unregisteredTokens: Set<DeviceToken>
    /// How long the gateway waits before it writes an error response and closes. Defaults to 500 ms.
    public var errorDelay: TimeAmount
    public var binaryFaults: BinaryFaults
    public var http2: HTTP2Options
    public var http2Faults: HTTP2Faults
    /// Keep a digest of the payload each token was last accepted with
    /// (``DeliveryLedger/payloadDigest(of:)``), to check per-recipient payloads. Off by default:
    /// it costs memory per token.
    public var recordPayloads = false

    public init(
        host: String = "127.0.0.1",
        binaryPort: Int? = 2195,
        feedbackPort: Int? = 2196,
        adminPort: Int? = 8195,
        tls: TLSFiles,
        invalidTokens: Set<DeviceToken> = [],
        unregisteredTokens: Set<DeviceToken> = [],
        errorDelay: TimeAmount = .milliseconds(500),
        binaryFaults: BinaryFaults = BinaryFaults(),
        http2Port: Int? = nil,
        http2: HTTP2Options = HTTP2Options(),
        http2Faults: HTTP2Faults = HTTP2Faults()
    ) {
        self.host = host
        self.binaryPort = binaryPort
        self.feedbackPort = feedbackPort
        self.adminPort = adminPort
        self.tls = tls
        self.invalidTokens = invalidTokens
        self.unregisteredTokens = unregisteredTokens
        self.errorDelay = errorDelay
        self.binaryFaults = binaryFaults
        self.http2Port = http2Port
        self.http2 = http2
        self.http2Faults = http2Faults
    }
}
