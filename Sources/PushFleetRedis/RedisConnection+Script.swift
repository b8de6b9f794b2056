import Logging

// MARK: - Lua scripts

extension RedisConnection {
    /// Runs `script` with `EVALSHA`, sending its source with `EVAL` if Redis answers `NOSCRIPT`.
    ///
    /// - Parameters:
    ///   - script: The script; its SHA-1 is computed locally.
    ///   - keys: Every key the script touches (`KEYS[1…]`), so Redis Cluster can route it.
    ///   - arguments: The other arguments (`ARGV[1…]`).
    /// - Returns: The script's reply; a runtime error in the script is an `.error` reply.
    /// - Throws: ``RedisError`` when the connection fails.
    public func evaluate(_ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]]) throws(RedisError) -> RedisReply {
        var command = Self.evaluateCommand(script, keys: keys, arguments: arguments)
        let reply = try self.command(command)
        guard Self.isNoScript(reply) else { return reply }
        // The server lost its script cache (restart, failover, SCRIPT FLUSH); EVAL caches it again.
        self.logger.debug("script not cached by Redis; sending its source", metadata: ["script.sha1": "\(script.sha1)"])
        command[0] = Array("EVAL".utf8)
        command[1] = Array(script.source.utf8)
        return try self.command(command)
    }

    /// The `EVALSHA` command of ``evaluate(_:keys:arguments:)``, to send in a pipeline; a reply
    /// for which ``isNoScript(_:)`` holds means: run it again with ``evaluate(_:keys:arguments:)``.
    static func evaluateCommand(_ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]]) -> [[UInt8]] {
        var command: [[UInt8]] = []
        command.reserveCapacity(3 + keys.count + arguments.count)
        command.append(Array("EVALSHA".utf8))
        command.append(Array(script.sha1.utf8))
        command.append(keys.count.redisArgument)
        command.append(contentsOf: keys)
        command.append(contentsOf: arguments)
        return command
    }

    /// Whether Redis did not know the script (it lost its script cache: a restart, a failover, SCRIPT FLUSH).
    static func isNoScript(_ reply: RedisReply) -> Bool {
        if case .error(let message) = reply { message.hasPrefix("NOSCRIPT") } else { false }
    }
}
