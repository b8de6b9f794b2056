public import APNSWire
public import NIOCore
public import NIOSSL

extension BinarySender {
    /// How a ``BinarySender`` connects and paces itself. Every default is stated with its unit.
    public struct Configuration: Sendable {
        /// Gateway host, e.g. `gateway.push.apple.com` or `127.0.0.1` for the simulator.
        public var host: String
        /// Gateway port. Defaults to 2195.
        public var port: Int
        /// Client TLS: the provider certificate and the trust roots.
        public var tls: TLSConfiguration
        /// Name to verify the gateway's certificate against (and to send as SNI). Defaults to `host`.
        public var serverHostname: String?
        /// Frames written per flush, and between two checks for an error response. Defaults to 100.
        public var batchSize: Int
        /// Frames written between two proofs. After this many, the sender writes a sentinel frame
        /// the gateway must reject and writes nothing more on the connection until the rejection
        /// arrives and confirms them all; then it reconnects. Also the most frames a silent drop can
        /// leave unknown (and so re-sent). Defaults to 20,000 frames.
        public var confirmEvery: Int
        /// How long to wait for the sentinel's rejection before giving the connection up as
        /// broken (its unconfirmed frames are then re-sent). Should be longer than the gateway's
        /// error delay (APNs: 0.1–1 s). After each timeout the next round waits twice as long (up to
        /// 8 times this), after a proof this long again, so that a gateway slower than this is still
        /// proven. The same bound applies to a connection that takes no bytes (not writable) while
        /// frames are unconfirmed. Defaults to 5 seconds.
        public var confirmationTimeout: TimeAmount
        /// How long the queue may stay empty before the sentinel is written for the frames so far.
        /// Defaults to 5 milliseconds.
        public var linger: TimeAmount
        /// `send` suspends while this many notifications wait to be written. Defaults to 10,000.
        public var maximumQueued: Int
        /// Time allowed for TCP connect, and again for the TLS handshake after it. Defaults to 10 seconds.
        public var connectTimeout: TimeAmount
        /// Delays between failing connection attempts. Defaults to 100 ms doubling to 30 s.
        public var backoff: Backoff
        /// Times a frame's fate may be left unknown (its connection closed without an error
        /// response, or one named no frame of its round) before it has its final outcome: rejected
        /// alone (`ConnectionLost`) if rounds were proven meanwhile, else refused as an outage.
        /// Defaults to 5.
        public var maximumAttempts: Int

        public init(
            host: String,
            port: Int = 2195,
            tls: TLSConfiguration,
            serverHostname: String? = nil,
            batchSize: Int = 100,
            confirmEvery: Int = 20_000,
            confirmationTimeout: TimeAmount = .seconds(5),
            linger: TimeAmount = .milliseconds(5),
            maximumQueued: Int = 10_000,
            connectTimeout: TimeAmount = .seconds(10),
            backoff: Backoff = Backoff(),
            maximumAttempts: Int = 5
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.serverHostname = serverHostname
            self.batchSize = max(1, batchSize)
            self.confirmEvery = max(1, confirmEvery)
            self.confirmationTimeout = confirmationTimeout
            self.linger = linger
            self.maximumQueued = max(1, maximumQueued)
            self.connectTimeout = connectTimeout
            self.backoff = backoff
            self.maximumAttempts = max(1, maximumAttempts)
        }
    }

    /// Counters since the sender was made.
    public struct Statistics: Hashable, Sendable {
        /// Frames written to a connection, re-sends included.
        public var framesWritten = 0
        /// Frames written again because the gateway discarded them or their fate was unknown:
        /// frames written in vain.
        public var framesResent = 0
        /// The part of ``framesResent`` whose fate was unknown: after a silent close, or an error
        /// response naming no frame of the round (the last attempt of a frame included, which a
        /// resumed campaign sends again). Only these can reach the gateway twice; frames after an
        /// error response naming one were discarded by it.
        public var framesResentAfterSilentClose = 0
        public var accepted = 0
        public var rejected = 0
        /// Notifications taken back unwritten by ``BinarySender/withdraw(where:)``.
        public var withdrawn = 0
        /// TLS connections established.
        public var connectionsOpened = 0
        /// Connections ended by an error response (sentinels' included).
        public var errorResponses = 0
        /// Sentinel frames written to prove what came before them.
        public var sentinels = 0
        /// Connections that ended without an error response while frames were unconfirmed.
        public var silentCloses = 0
        /// Failed attempts to connect (TCP or TLS).
        public var connectFailures = 0
        /// Error responses whose identifier matched no unconfirmed frame; their window was re-sent.
        public var unmatchedErrors = 0
        /// Connections given up because the sentinel's rejection did not come in time, or because
        /// they took no bytes for as long while frames were unconfirmed.
        public var confirmationTimeouts = 0

        public init() {}
    }
}
