/// Why a Postgres operation of PushFleet failed. Messages name the server by host and port, and
/// never contain a password.
public struct PostgresStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is; stable across releases and compared by `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case invalidURL, connectionFailed, queryFailed, invalidInput, unknownCampaign, invalidEventID
            case leadershipLost, queueRebuilt
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The Postgres URL is malformed or uses an unsupported option.
        public static let invalidURL = Self(.invalidURL)
        /// The server could not be reached, refused the login, or dropped the connection.
        public static let connectionFailed = Self(.connectionFailed)
        /// The server rejected a statement.
        public static let queryFailed = Self(.queryFailed)
        /// An argument was rejected before anything was written.
        public static let invalidInput = Self(.invalidInput)
        /// No campaign has the given id.
        public static let unknownCampaign = Self(.unknownCampaign)
        /// A Redis stream id is not of the form `ms-seq`.
        public static let invalidEventID = Self(.invalidEventID)
        /// The connection holding the leadership lock broke while the leader's body ran.
        public static let leadershipLost = Self(.leadershipLost)
        /// A fold read a campaign's Redis queue before it was rebuilt; it is refused.
        public static let queueRebuilt = Self(.queueRebuilt)

        public var description: String { self.base.rawValue }
    }

    public let code: Code
    /// A sentence for a person: what is wrong and where.
    public let message: String
    /// Where the error was made.
    public let file: String
    public let line: Int

    public var description: String { self.message }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    init(_ code: Code, _ message: String, file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.file = file
        self.line = line
    }

    static func invalidURL(_ problem: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.invalidURL, "invalid Postgres URL: \(problem) (expected postgres://user[:password]@host:port/database)", file: file, line: line)
    }

    static func connectionFailed(_ endpoint: String, _ reason: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.connectionFailed, "cannot use Postgres at \(endpoint): \(reason)", file: file, line: line)
    }

    static func queryFailed(_ endpoint: String, _ operation: String, _ reason: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.queryFailed, "Postgres at \(endpoint) failed to \(operation): \(reason)", file: file, line: line)
    }

    static func invalidInput(_ problem: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.invalidInput, problem, file: file, line: line)
    }

    static func unknownCampaign(_ id: some CustomStringConvertible, file: String = #fileID, line: Int = #line) -> Self {
        Self(.unknownCampaign, "no campaign \(id) in Postgres", file: file, line: line)
    }

    static func invalidEventID(_ text: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.invalidEventID, "'\(text)' is not a Redis stream id (milliseconds-sequence, e.g. 1700000000000-0)", file: file, line: line)
    }

    static func queueRebuilt(_ id: some CustomStringConvertible, read: Int, stored: Int, file: String = #fileID, line: Int = #line) -> Self {
        Self(
            .queueRebuilt,
            "campaign \(id): this fold read generation \(read) of its Redis queue, which has been rebuilt since (generation \(stored)); "
                + "nothing was written",
            file: file, line: line
        )
    }

    static func leadershipLost(_ endpoint: String, _ reason: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(.leadershipLost, "lost the leadership lock on Postgres at \(endpoint): \(reason)", file: file, line: line)
    }
}
