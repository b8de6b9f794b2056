// MARK: - Calls that treat error replies as errors (used by CampaignQueue)

extension RedisConnection {
    /// Runs a command; an error reply throws ``RedisError/Code/errorReply``.
    func checkedCommand(_ arguments: [[UInt8]]) throws(RedisError) -> RedisReply {
        let reply = try self.command(arguments)
        if case .error(let message) = reply { throw self.errorReply(arguments, message) }
        return reply
    }

    /// Runs a pipeline; the first error reply throws ``RedisError/Code/errorReply`` after all replies were read.
    func checkedPipeline(_ commands: [[[UInt8]]]) throws(RedisError) -> [RedisReply] {
        try self.checkedPipeline(RedisCommands(commands))
    }

    /// ``checkedPipeline(_:)-([[[UInt8]]])`` of commands written already.
    func checkedPipeline(_ commands: RedisCommands) throws(RedisError) -> [RedisReply] {
        let replies = try self.pipeline(commands)
        for (index, reply) in replies.enumerated() {
            if case .error(let message) = reply { throw .errorReply(self.lastServer, command: commands.name(of: index), message) }
        }
        return replies
    }

    /// Runs a script; an error reply throws ``RedisError/Code/errorReply`` naming the script.
    func checkedEvaluate(
        _ name: String, _ script: RedisScript, keys: [[UInt8]], arguments: [[UInt8]]
    ) throws(RedisError) -> RedisReply {
        let reply = try self.evaluate(script, keys: keys, arguments: arguments)
        if case .error(let message) = reply {
            throw .errorReply(self.lastServer, command: "the \(name) script", message)
        }
        return reply
    }

    /// An error for a reply of the wrong shape.
    func unexpected(_ what: String, _ reply: RedisReply) -> RedisError {
        .unexpectedReply(self.lastServer, command: what, reply)
    }

    /// The integer of `reply`, or an error naming `what`.
    func integer(_ reply: RedisReply, _ what: String) throws(RedisError) -> Int {
        guard let value = reply.integer else { throw self.unexpected(what, reply) }
        return value
    }

    /// The field/value pairs of an `HGETALL` (or stream entry) reply.
    func fieldMap(_ reply: RedisReply, _ what: String) throws(RedisError) -> [String: [UInt8]] {
        guard let elements = reply.array, elements.count % 2 == 0 else { throw self.unexpected(what, reply) }
        var fields: [String: [UInt8]] = [:]
        fields.reserveCapacity(elements.count / 2)
        for index in stride(from: 0, to: elements.count, by: 2) {
            guard let name = elements[index].string, let value = elements[index + 1].bytes else {
                throw self.unexpected(what, reply)
            }
            fields[name] = value
        }
        return fields
    }

    private func errorReply(_ arguments: [[UInt8]], _ message: String) -> RedisError {
        // Name only the command: arguments may be tokens or payloads.
        let name = arguments.first.map { String(decoding: $0, as: UTF8.self).uppercased() } ?? "?"
        return .errorReply(self.lastServer, command: name, message)
    }
}
