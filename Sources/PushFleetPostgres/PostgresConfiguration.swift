import Foundation

/// Where PushFleet's Postgres database is and how to reach it, parsed from a URL of the form
/// `postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require][&connect_timeout=SECONDS]`.
///
/// The password is kept out of ``description`` and every error message. Characters such as `@ : / ? #`
/// in the user, password or database name must be percent-encoded.
public struct PostgresConfiguration: Sendable, CustomStringConvertible {
    /// Whether the connection uses TLS, as libpq's `sslmode`.
    public struct TLSMode: Hashable, Sendable, CustomStringConvertible {
        enum Base: String, Hashable, Sendable { case disable, prefer, require }
        let base: Base

        /// Plain TCP.
        public static let disable = Self(base: .disable)
        /// TLS if the server offers it, with the certificate verified against the system's roots; plain
        /// TCP if the server has no TLS. The default.
        public static let prefer = Self(base: .prefer)
        /// TLS with a verified certificate, or no connection.
        public static let require = Self(base: .require)

        public var description: String { self.base.rawValue }
    }

    /// The server's host name or IP address.
    public var host: String
    /// The server's TCP port. Defaults to 5432 when the URL names none.
    public var port: Int
    /// The user to log in as.
    public var username: String
    /// The database to open.
    public var database: String
    /// TLS use. Defaults to ``TLSMode/prefer``; set with `?sslmode=` in the URL.
    public var tls: TLSMode
    /// Time allowed for TCP connect (and TLS handshake) to the server. Defaults to 10 seconds; set
    /// with `connect_timeout=` (whole seconds, as libpq's) in the URL.
    public var connectTimeout: Duration = .seconds(10)
    /// The most connections the store's pool opens at once. Defaults to 20; the leadership lock and
    /// migrations each use one more, dedicated connection.
    public var maximumConnections: Int = 20
    /// How often the leader pings the connection holding its lock. Defaults to 2 seconds. A closed
    /// connection is noticed at once; one that stops answering, after five intervals.
    public var leadershipCheckInterval: Duration = .seconds(2)
    /// How long the server lets a transaction of this process sit idle before it ends the session
    /// (`idle_in_transaction_session_timeout`). PushFleet's transactions wait on nothing but
    /// Postgres, so only a process that is frozen or starved leaves one idle; ended, it can no
    /// longer hold the row locks a standby coordinator needs. Defaults to 30 seconds.
    public var idleInTransactionTimeout: Duration = .seconds(30)

    /// Startup parameters every connection sends.
    var startupParameters: [(String, String)] {
        [("idle_in_transaction_session_timeout", "\(Self.milliseconds(self.idleInTransactionTimeout))")]
    }

    /// `duration` in whole milliseconds, at least 1: Postgres' unit for timeouts.
    static func milliseconds(_ duration: Duration) -> Int64 {
        max(1, duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000)
    }

    /// The password, if the URL has one. Never printed.
    var password: String?

    /// `host:port`, for messages (IPv6 addresses in brackets).
    public var endpoint: String { self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)" }

    /// The URL without its password.
    public var description: String {
        "postgres://\(self.username)\(self.password == nil ? "" : ":***")@\(self.endpoint)/\(self.database)"
            + Self.query([
                self.tls == .prefer ? nil : "sslmode=\(self.tls)",
                self.connectTimeout == .seconds(10) ? nil : "connect_timeout=\(self.connectTimeout.components.seconds)",
            ])
    }

    private static func query(_ parameters: [String?]) -> String {
        let present = parameters.compactMap { $0 }
        return present.isEmpty ? "" : "?" + present.joined(separator: "&")
    }

    /// Parses a `postgres://` (or `postgresql://`) URL.
    /// - Throws: ``PostgresStoreError`` with code `invalidURL`, saying what is missing or wrong.
    public init(url: String) throws {
        guard let schemeEnd = url.range(of: "://") else { throw PostgresStoreError.invalidURL("no scheme; it must start with postgres://") }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        guard scheme == "postgres" || scheme == "postgresql" else {
            throw PostgresStoreError.invalidURL("scheme '\(scheme)' is not postgres")
        }
        var rest = url[schemeEnd.upperBound...]
        var query: Substring = ""
        if let mark = rest.firstIndex(of: "?") {
            query = rest[rest.index(after: mark)...]
            rest = rest[..<mark]
        }
        guard let slash = rest.firstIndex(of: "/") else { throw PostgresStoreError.invalidURL("no database name after the host") }
        let authority = rest[..<slash]
        let path = rest[rest.index(after: slash)...]
        guard let at = authority.lastIndex(of: "@") else { throw PostgresStoreError.invalidURL("no user (postgres://USER@host…)") }

        let userInfo = authority[..<at]
        let user = userInfo.firstIndex(of: ":").map { userInfo[..<$0] } ?? userInfo
        guard let username = Self.decode(user), !username.isEmpty else { throw PostgresStoreError.invalidURL("no user (postgres://USER@host…)") }
        self.username = username
        if let colon = userInfo.firstIndex(of: ":") {
            guard let password = Self.decode(userInfo[userInfo.index(after: colon)...]) else {
                throw PostgresStoreError.invalidURL("the password has a malformed percent-escape")
            }
            self.password = password
        }
        (self.host, self.port) = try Self.hostAndPort(authority[authority.index(after: at)...])
        guard let database = Self.decode(path), !database.isEmpty, !database.contains("/") else {
            throw PostgresStoreError.invalidURL("the database name '\(path)' is empty or malformed")
        }
        self.database = database
        self.tls = .prefer
        try self.apply(query)
    }

    private static func decode(_ text: Substring) -> String? {
        String(text).removingPercentEncoding
    }

    private static func hostAndPort(_ text: Substring) throws -> (String, Int) {
        var host = text
        var portText: Substring? = nil
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw PostgresStoreError.invalidURL("unclosed '[' in the host") }
            host = text[text.index(after: text.startIndex)..<close]
            let after = text[text.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw PostgresStoreError.invalidURL("unexpected '\(after)' after the host") }
                portText = after.dropFirst()
            }
        } else if let colon = text.firstIndex(of: ":") {
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty else { throw PostgresStoreError.invalidURL("no host") }
        guard let portText else { return (String(host), 5432) }
        guard let port = Int(portText), (1...65535).contains(port) else {
            throw PostgresStoreError.invalidURL("port '\(portText)' is not a number from 1 to 65535")
        }
        return (String(host), port)
    }

    private mutating func apply(_ query: Substring) throws {
        for parameter in query.split(separator: "&") {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { throw PostgresStoreError.invalidURL("parameter '\(parameter)' has no value") }
            switch pair[0] {
            case "sslmode":
                guard let base = TLSMode.Base(rawValue: String(pair[1])) else {
                    throw PostgresStoreError.invalidURL("sslmode '\(pair[1])' is not disable, prefer or require")
                }
                self.tls = TLSMode(base: base)
            case "connect_timeout":
                guard let seconds = Int(pair[1]), (1...3_600).contains(seconds) else {
                    throw PostgresStoreError.invalidURL("connect_timeout '\(pair[1])' is not a whole number of seconds from 1 to 3600")
                }
                self.connectTimeout = .seconds(seconds)
            default:
                throw PostgresStoreError.invalidURL("unsupported parameter '\(pair[0])' (sslmode and connect_timeout are understood)")
            }
        }
    }
}
