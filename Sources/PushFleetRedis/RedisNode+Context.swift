import CHiredis
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

#if os(Linux)
/// hiredis writes with write(2), which raises SIGPIPE, killing the process, when the server has
/// closed the connection. Like SwiftNIO on Linux, ignore SIGPIPE process-wide (once) so such a
/// write fails with EPIPE and becomes a ``RedisError``.
private let sigpipeIgnored: Bool = {
    _ = signal(SIGPIPE, SIG_IGN)
    return true
}()
#endif

// MARK: - Opening and failing the hiredis context

extension RedisNode {
    /// The open context, connecting first (then `AUTH` and `SELECT` when configured) if there is none.
    func connectedContext() throws(RedisError) -> UnsafeMutablePointer<redisContext> {
        if let context = self.currentContext { return context }
        #if os(Linux)
        _ = sigpipeIgnored
        #endif
        let configuration = self.configuration
        let server = configuration.server
        let port = Int32(clamping: configuration.port)
        guard let context = redisConnectWithTimeout(configuration.host, port, Self.timeval(configuration.connectTimeout)) else {
            throw .connectionFailed(server, "hiredis could not allocate a context")
        }
        guard context.pointee.err == 0 else {
            let problem = Self.errorText(context)
            redisFree(context)
            self.logger.warning("cannot connect to Redis", metadata: ["error": "\(problem)"])
            throw .connectionFailed(server, problem)
        }
        _ = redisSetTimeout(context, Self.timeval(configuration.commandTimeout))
        _ = redisEnableKeepAlive(context)
        self.currentContext = context

        if let password = configuration.password {
            try self.handshake(["AUTH", password], what: "AUTH", password: password)
        }
        if configuration.database != 0 {
            let select = ["SELECT", String(configuration.database)]
            try self.handshake(select, what: "SELECT \(configuration.database)", password: nil)
        }
        self.logger.debug("connected to Redis")
        return context
    }

    /// Runs `AUTH` or `SELECT` on the fresh context; any failure closes it and is a connection failure.
    private func handshake(_ arguments: [String], what: String, password: String?) throws(RedisError) {
        let server = self.configuration.server
        let reply: RedisReply
        do {
            reply = try self.command(arguments.map { Array($0.utf8) })
        } catch {
            throw .connectionFailed(server, "\(what) failed: \(error.message)")
        }
        guard case .error(var message) = reply else { return }
        self.close()
        // Redis does not echo the password today; make sure a future version cannot leak it either.
        if let password, !password.isEmpty { message = message.replacing(password, with: "***") }
        throw .connectionFailed(server, "\(what) was refused: \(message)")
    }

    /// Frees a context that failed mid-command and describes why; the next call reconnects.
    func fail(_ context: UnsafeMutablePointer<redisContext>) -> RedisError {
        let code = context.pointee.err
        var problem = Self.errorText(context)
        if code == REDIS_ERR_IO, problem.contains("temporarily unavailable") {
            problem = "no reply within the command timeout of \(self.configuration.commandTimeout)"
        }
        redisFree(context)
        if self.currentContext == context { self.currentContext = nil }
        self.logger.warning("Redis connection failed; reconnecting on the next command", metadata: ["error": "\(problem)"])
        let server = self.configuration.server
        switch code {
        case REDIS_ERR_PROTOCOL, REDIS_ERR_OOM: return .protocolError(server, problem)
        default: return .connectionLost(server, problem)
        }
    }

    /// hiredis' `errstr`, a fixed `char[128]`, as a String.
    private static func errorText(_ context: UnsafeMutablePointer<redisContext>) -> String {
        let text = withUnsafeBytes(of: &context.pointee.errstr) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        return text.isEmpty ? "unknown error (hiredis code \(context.pointee.err))" : text
    }

    private static func timeval(_ duration: Duration) -> timeval {
        let (seconds, attoseconds) = duration.components
        let microseconds = max(0, attoseconds / 1_000_000_000_000)
        return .init(tv_sec: .init(max(0, seconds)), tv_usec: .init(microseconds))
    }
}
