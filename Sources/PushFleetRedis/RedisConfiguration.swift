/// Where a Redis server is and how to talk to it.
///
/// The password is sent with `AUTH` after connecting and appears nowhere else: not in
/// ``description``, not in error messages, not in logs.
public struct RedisConfiguration: Hashable, Sendable, CustomStringConvertible {
    /// The server's host name or IP address, without brackets for IPv6. Default `127.0.0.1`.
    public var host: String
    /// The server's TCP port. Default `6379`.
    public var port: Int
    /// Sent with `AUTH` after connecting when set. Default `nil`.
    public var password: String?
    /// The database index, selected with `SELECT` after connecting when not 0. Default `0`.
    public var database: Int
    /// How long to wait for the TCP connection. Default 5 seconds.
    ///
    /// Name resolution in hiredis is blocking and not covered by this timeout; prefer IP addresses.
    public var connectTimeout: Duration
    /// How long one read or write of a command or pipeline may block. Default 5 seconds.
    ///
    /// A timeout makes the connection unusable: it is closed and reopened on the next command.
    public var commandTimeout: Duration

    /// The server's default port, `6379`.
    public static let defaultPort = 6379

    public init(
        host: String = "127.0.0.1",
        port: Int = RedisConfiguration.defaultPort,
        password: String? = nil,
        database: Int = 0,
        connectTimeout: Duration = .seconds(5),
        commandTimeout: Duration = .seconds(5)
    ) {
        self.host = host
        self.port = port
        self.password = password
        self.database = database
        self.connectTimeout = connectTimeout
        self.commandTimeout = commandTimeout
    }

    /// `host:port` (IPv6 addresses in brackets), as every message about this server names it.
    public var server: String {
        self.host.contains(":") ? "[\(self.host)]:\(self.port)" : "\(self.host):\(self.port)"
    }

    /// The configuration as a URL with the password masked: `redis://:***@host:port/db`.
    public var description: String {
        "redis://\(self.password == nil ? "" : ":***@")\(self.server)/\(self.database)"
    }
}
