import CHiredis
import Logging

/// One blocking hiredis connection to one Redis server (a standalone Redis or one cluster node),
/// for use from a single thread. ``RedisConnection`` routes commands to its nodes.
///
/// Commands are written in Redis' protocol by ``RedisCommands``, binary-safe; hiredis sends them
/// and parses the replies. Any I/O error, timeout or protocol error leaves replies possibly in
/// flight, so the context is freed at once and a new one is opened by the next call; the failed
/// call throws and is never retried here (a command may have run). An error *reply* is returned
/// as ``RedisReply/error(_:)`` and leaves the connection usable.
///
/// Not `Sendable`: a `redisContext` is not thread-safe.
final class RedisNode {
    /// The server's address and credentials; `host:port` is ``RedisConfiguration/server``.
    let configuration: RedisConfiguration
    let logger: Logger
    var currentContext: UnsafeMutablePointer<redisContext>?

    /// Creates a node connection that connects on its first command.
    init(configuration: RedisConfiguration, logger: Logger) {
        self.configuration = configuration
        var logger = logger
        logger[metadataKey: "redis.server"] = "\(configuration.server)"
        self.logger = logger
    }

    deinit {
        if let currentContext { redisFree(currentContext) }
    }

    /// `host:port`, as messages name this node.
    var server: String { self.configuration.server }

    /// Whether a context is open. A closed node reconnects on its next command.
    var isConnected: Bool { self.currentContext != nil }

    /// Closes the connection now; the next command opens a new one.
    func close() {
        if let currentContext { redisFree(currentContext) }
        self.currentContext = nil
    }

    /// Sends one command and waits for its reply.
    /// - Parameter arguments: The command name and its arguments, each sent as raw bytes. Not empty.
    /// - Returns: The reply; an error reply is `.error`, not a thrown error.
    /// - Throws: ``RedisError`` when the server cannot be reached or the connection fails.
    func command(_ arguments: [[UInt8]]) throws(RedisError) -> RedisReply {
        precondition(!arguments.isEmpty, "a Redis command needs at least its name")
        return try self.pipeline(RedisCommands([arguments]))[0]
    }

    /// Sends many commands in one write and reads all their replies, in order.
    ///
    /// Replies wait in the server's memory until read, so keep pipelines to thousands of commands.
    /// - Parameter commands: Each command's name and arguments. May be empty.
    /// - Returns: One reply per command, in the order sent; error replies are `.error` values.
    /// - Throws: ``RedisError`` when the connection fails; no reply of the pipeline is returned then.
    func pipeline(_ commands: [[[UInt8]]]) throws(RedisError) -> [RedisReply] {
        try self.pipeline(RedisCommands(commands))
    }

    /// ``pipeline(_:)`` of commands written already.
    func pipeline(_ commands: RedisCommands) throws(RedisError) -> [RedisReply] {
        guard !commands.isEmpty else { return [] }
        let context = try self.connectedContext()
        guard Self.append(commands, to: context) == REDIS_OK else { throw self.fail(context) }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in 0..<commands.count {
            var raw: UnsafeMutableRawPointer? = nil
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else { throw self.fail(context) }
            replies.append(RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self)))
            freeReplyObject(raw)
        }
        return replies
    }

    /// Queues `commands` in hiredis' output buffer: one copy, where hiredis' own formatting would
    /// copy and format every argument.
    private static func append(_ commands: RedisCommands, to context: UnsafeMutablePointer<redisContext>) -> Int32 {
        precondition(commands.isComplete, "a command without all its arguments")
        return commands.bytes.withUnsafeBytes { bytes in
            // UInt8 and CChar may alias: they are the signed and unsigned variants of one type.
            redisAppendFormattedCommand(context, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
    }
}

// A redisContext must be used from one thread at a time; RedisClient confines each connection.
@available(*, unavailable)
extension RedisNode: Sendable {}
