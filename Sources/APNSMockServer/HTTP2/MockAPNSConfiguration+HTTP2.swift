import Crypto
public import NIOCore
public import PushFleetCore
import Foundation

extension MockAPNSConfiguration {
    /// A provider-token signing key the HTTP/2 gateway knows.
    public typealias ProviderKey = MockAPNSProviderKey

    /// How the HTTP/2 gateway authenticates and validates, beyond the token sets it shares with the
    /// binary gateway (``MockAPNSConfiguration/invalidTokens`` are answered 400 `BadDeviceToken`,
    /// ``MockAPNSConfiguration/unregisteredTokens`` 410 `Unregistered`).
    public struct HTTP2Options: Sendable {
        /// Keys whose provider tokens are accepted. Defaults to none: only client certificates
        /// authenticate.
        public var providerKeys: [ProviderKey]
        /// The topics that may be pushed to. An entry is an app's bundle ID, which allows it with
        /// every push type's suffix (`.voip`, `.complication`, …), or one exact topic; any other
        /// topic gets 400 `TopicDisallowed`. `nil` (the default) allows any well-formed topic.
        public var allowedTopics: Set<String>?
        /// Tokens registered for another topic (another app, or the same app's other push type):
        /// answered 400 `DeviceTokenNotForTopic`. Defaults to none.
        public var otherTopicTokens: Set<DeviceToken>
        /// SETTINGS_MAX_CONCURRENT_STREAMS once a request on the connection authenticated; before
        /// that it is 1, as at APNs. Defaults to 1000.
        public var maxConcurrentStreams: Int
        /// A connection on which no request has started for this long (counted from the client's
        /// connection preface) is closed with `GOAWAY`
        /// (NO_ERROR, debug data `{"reason":"IdleTimeout"}`); PING frames do not keep it open.
        /// `nil` (the default) keeps idle connections.
        public var idleTimeout: TimeAmount?
        /// The connection-level window the gateway keeps open for request bodies, in bytes; credit
        /// is returned once half of it has been read. Defaults to 16 MiB. A small window (65,535,
        /// HTTP/2's default) makes the client wait for `WINDOW_UPDATE` often, as a less generous
        /// gateway would.
        public var connectionWindow: Int
        /// Credit for request bodies is returned with a `WINDOW_UPDATE` for every DATA frame read,
        /// as common HTTP/2 servers do, instead of once half of ``connectionWindow`` was read.
        /// Defaults to false.
        public var windowUpdatePerRequest: Bool
        /// Every answer frame is flushed on its own, so a client reads answers spread over many
        /// small TLS records (a record per frame), as servers that do not batch their writes send
        /// them. Defaults to false: a read burst's answers leave in one write.
        public var flushEachFrame: Bool
        /// The wall clock in milliseconds since 1970, for provider-token ages, the 20-minute token
        /// update rule and 410 timestamps. Defaults to the system clock; tests move it.
        public var now: @Sendable () -> Int64

        public init(
            providerKeys: [ProviderKey] = [],
            allowedTopics: Set<String>? = nil,
            otherTopicTokens: Set<DeviceToken> = [],
            maxConcurrentStreams: Int = 1000,
            idleTimeout: TimeAmount? = nil,
            connectionWindow: Int = 1 << 24,
            windowUpdatePerRequest: Bool = false,
            flushEachFrame: Bool = false,
            now: (@Sendable () -> Int64)? = nil
        ) {
            self.windowUpdatePerRequest = windowUpdatePerRequest
            self.flushEachFrame = flushEachFrame
            self.connectionWindow = min(max(connectionWindow, 1), Int(Int32.max))
            self.providerKeys = providerKeys
            self.allowedTopics = allowedTopics
            self.otherTopicTokens = otherTopicTokens
            self.maxConcurrentStreams = maxConcurrentStreams
            self.idleTimeout = idleTimeout
            self.now = now ?? { Int64(Date().timeIntervalSince1970 * 1000) }
        }
    }

    /// Faults the HTTP/2 gateway injects on purpose. Request streams are numbered from 1 across the
    /// whole gateway (every stream it processes, whatever its verdict), so a test knows exactly which
    /// streams are hit. A faulted stream is answered instead of validated and never enters the ledger.
    /// If two faults fall on the same stream, 503 wins over 500, and 500 over 429.
    public struct HTTP2Faults: Sendable, Hashable {
        /// Answer every this many streams 429 `TooManyRequests`. `nil` (the default) never does.
        public var tooManyRequestsEvery: Int?
        /// Answer every this many streams 500 `InternalServerError`. `nil` (the default) never does.
        public var internalServerErrorEvery: Int?
        /// Answer every this many streams 503 `ServiceUnavailable`. `nil` (the default) never does.
        public var serviceUnavailableEvery: Int?
        /// Process this many streams on one connection, answer them, then send `GOAWAY` (NO_ERROR,
        /// last stream id = the last stream processed, debug data `{"reason":"Shutdown"}`) and
        /// close. Streams above the last id are neither processed nor recorded. `nil` (the default)
        /// never does.
        public var goAwayAfter: Int?
        /// With ``goAwayAfter``: shut down in two steps, as Go's HTTP/2 server does and as APNs has
        /// been seen to send two GOAWAYs. At the Nth stream a GOAWAY naming 2^31-1 (open no more
        /// streams; none is refused yet) and a PING; streams keep being processed, and once the
        /// PING's acknowledgement is read (every stream the client opened before it read the
        /// GOAWAY has arrived by then) a second GOAWAY names the last stream processed, after
        /// every stream is answered, and the connection closes. Defaults to false.
        public var goAwayInTwoSteps: Bool
        /// How long every answer waits before it is written. `nil` (the default) answers at once.
        public var answerDelay: TimeAmount?

        public init(
            tooManyRequestsEvery: Int? = nil,
            internalServerErrorEvery: Int? = nil,
            serviceUnavailableEvery: Int? = nil,
            goAwayAfter: Int? = nil,
            goAwayInTwoSteps: Bool = false,
            answerDelay: TimeAmount? = nil
        ) {
            self.tooManyRequestsEvery = tooManyRequestsEvery
            self.internalServerErrorEvery = internalServerErrorEvery
            self.serviceUnavailableEvery = serviceUnavailableEvery
            self.goAwayAfter = goAwayAfter
            self.goAwayInTwoSteps = goAwayInTwoSteps
            self.answerDelay = answerDelay
        }

        /// Whether any fault counted gateway-wide is set.
        var countsGatewayStreams: Bool {
            self.tooManyRequestsEvery != nil || self.internalServerErrorEvery != nil || self.serviceUnavailableEvery != nil
        }
    }
}

extension MockAPNSProviderKey {
    /// Reads the public key from a PEM file (`-----BEGIN PUBLIC KEY-----`).
    /// - Throws: ``MockAPNSError`` naming the file.
    public init(keyID: String, teamID: String, publicKeyPEMFile path: String) throws {
        let publicKey: P256.Signing.PublicKey
        do {
            publicKey = try P256.Signing.PublicKey(pemRepresentation: try String(contentsOfFile: path, encoding: .utf8))
        } catch {
            throw MockAPNSError.unreadableKeyFile(path: path, underlying: error)
        }
        self.init(keyID: keyID, teamID: teamID, publicKey: publicKey)
    }
}

extension RefusedTokens {
    init(configuration: MockAPNSConfiguration) {
        self.init(invalid: configuration.invalidTokens, unregistered: configuration.unregisteredTokens, otherTopic: configuration.http2.otherTopicTokens)
    }
}
