import CHiredis
import Logging

/// One blocking hiredis connection to one Redis server (a standalone Redis or one cluster node),
/// for use from a single thread. ``RedisConnection`` routes commands to its nodes.
///
/// Commands go through hiredis' binary-safe Argv API only. Any I/O error, timeout or protocol error
/// leaves replies possibly in flight, so the context is freed at once and a new one is opened by
/// the next call; the failed call throws and is never retried here (a command may have run).
/// An error *reply* is returned as ``RedisReply/error(_:)`` and leaves the connection usable.
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
        let context = try self.connectedContext()
        let raw = Self.withArgv(arguments) { argc, argv, lengths in redisCommandArgv(context, argc, argv, lengths) }
        guard let raw else { throw self.fail(context) }
        defer { freeReplyObject(raw) }
        return RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self))
    }

    /// Sends many commands in one write and reads all their replies, in order.
    ///
    /// Replies wait in the server's memory until read, so keep pipelines to thousands of commands.
    /// - Parameter commands: Each command's name and arguments. May be empty.
    /// - Returns: One reply per command, in the order sent; error replies are `.error` values.
    /// - Throws: ``RedisError`` when the connection fails; no reply of the pipeline is returned then.
    func pipeline(_ commands: [[[UInt8]]]) throws(RedisError) -> [RedisReply] {
        guard !commands.isEmpty else { return [] }
        let context = try self.connectedContext()
        for arguments in commands {
            precondition(!arguments.isEmpty, "a Redis command needs at least its name")
            let status = Self.withArgv(arguments) { argc, argv, lengths in
                redisAppendCommandArgv(context, argc, argv, lengths)
            }
            guard status == REDIS_OK else { throw self.fail(context) }
        }
        var replies: [RedisReply] = []
        replies.reserveCapacity(commands.count)
        for _ in commands {
            var raw: UnsafeMutableRawPointer? = nil
            guard redisGetReply(context, &raw) == REDIS_OK, let raw else { throw self.fail(context) }
            replies.append(RedisReply(copying: raw.assumingMemoryBound(to: redisReply.self)))
            freeReplyObject(raw)
        }
        return replies
    }

    /// Calls `body` with hiredis' `argc`, `argv` and `argvlen` for `arguments`, all pointing into one
    /// contiguous copy of the bytes, valid only during the call.
    private static func withArgv<Result>(
        _ arguments: [[UInt8]],
        _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> Result
    ) -> Result {
        var lengths: [Int] = []
        lengths.reserveCapacity(arguments.count)
        var storage: [UInt8] = []
        storage.reserveCapacity(arguments.reduce(1) { $0 + $1.count })
        for argument in arguments {
            storage.append(contentsOf: argument)
            lengths.append(argument.count)
        }
        storage.append(0)  // keeps the base address non-nil when every argument is empty
        return storage.withUnsafeBytes { bytes in
            // UInt8 and CChar may alias: they are the signed and unsigned variants of one type.
            let base = bytes.baseAddress!.assumingMemoryBound(to: CChar.self)
            var pointers: [UnsafePointer<CChar>?] = []
            pointers.reserveCapacity(lengths.count)
            var offset = 0
            for length in lengths {
                pointers.append(base + offset)
                offset += length
            }
            return pointers.withUnsafeMutableBufferPointer { argv in
                lengths.withUnsafeBufferPointer { argvlen in
                    body(Int32(arguments.count), argv.baseAddress!, argvlen.baseAddress!)
                }
            }
        }
    }
}

// A redisContext must be used from one thread at a time; RedisClient confines each connection.
@available(*, unavailable)
extension RedisNode: Sendable {}
