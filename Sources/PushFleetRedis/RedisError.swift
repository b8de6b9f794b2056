/// A failure to reach or talk to Redis, or a reply PushFleet did not expect.
///
/// Messages name the server as `host:port` and never contain a password. An error *reply* from
/// Redis (`-ERR …`) is a ``RedisReply/error(_:)`` value at the connection level; the higher layers
/// (``CampaignQueue``) turn it into a ``RedisError`` with code ``Code/errorReply``.
public struct RedisError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is; stable across releases and compared by `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidURL, connectionFailed, connectionLost, protocolError, errorReply, unexpectedReply, clientShutDown, notRoutable
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// A Redis URL that is not `redis://[:password@]host[:port][/db]`.
        public static let invalidURL = Self(.invalidURL)
        /// The TCP connection, `AUTH` or `SELECT` failed.
        public static let connectionFailed = Self(.connectionFailed)
        /// An established connection failed: I/O error, timeout, or the server closed it.
        public static let connectionLost = Self(.connectionLost)
        /// hiredis could not parse what the server sent, or ran out of memory.
        public static let protocolError = Self(.protocolError)
        /// Redis answered a command with an error reply.
        public static let errorReply = Self(.errorReply)
        /// Redis answered with a reply of a shape PushFleet did not expect.
        public static let unexpectedReply = Self(.unexpectedReply)
        /// The ``RedisClient`` was shut down.
        public static let clientShutDown = Self(.clientShutDown)
        /// A command a Redis Cluster cannot run as one: its keys are in no single slot PushFleet can name.
        public static let notRoutable = Self(.notRoutable)

        public var description: String { self.base.rawValue }
    }

    public let code: Code
    /// A sentence for a person: what failed and where (`host:port`).
    public let message: String

    public var description: String { self.message }

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    static func invalidURL(_ redacted: String, _ problem: String) -> Self {
        Self(code: .invalidURL, message: "invalid Redis URL '\(redacted)': \(problem); expected redis://[:password@]host[:port][/db]")
    }

    static func connectionFailed(_ server: String, _ problem: String) -> Self {
        Self(code: .connectionFailed, message: "cannot connect to Redis at \(server): \(problem)")
    }

    static func connectionLost(_ server: String, _ problem: String) -> Self {
        Self(code: .connectionLost, message: "lost the connection to Redis at \(server): \(problem)")
    }

    static func protocolError(_ server: String, _ problem: String) -> Self {
        Self(code: .protocolError, message: "protocol error talking to Redis at \(server): \(problem)")
    }

    static func errorReply(_ server: String, command: String, _ reply: String) -> Self {
        Self(code: .errorReply, message: "Redis at \(server) answered \(command) with an error: \(reply)")
    }

    static func unexpectedReply(_ server: String, command: String, _ reply: RedisReply) -> Self {
        Self(code: .unexpectedReply, message: "Redis at \(server) answered \(command) with an unexpected reply: \(reply)")
    }
}
