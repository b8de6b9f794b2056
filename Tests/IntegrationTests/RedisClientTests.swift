import Foundation
import Logging
import NIOCore
import NIOPosix
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// The hiredis client against the real Redis that scripts/test.sh starts (`PUSHFLEET_REDIS_URL`).
@Suite struct RedisClientTests {
    private func configuration() throws -> RedisConfiguration {
        try RedisConfiguration(url: try IntegrationEnvironment.redisURL())
    }

    private func connection() throws -> RedisConnection {
        RedisConnection(configuration: try self.configuration(), logger: silentRedisLogger)
    }

    /// A key no parallel test uses.
    private func key(_ name: String) -> String { "pf-test:{\(UUID().uuidString.lowercased())}:\(name)" }

    @Test func bulkStringsSurviveNULBytesBothWays() throws {
        let connection = try self.connection()
        let key = Array(self.key("binary").utf8) + [0, 0xFF]  // the key itself holds a NUL byte
        let value: [UInt8] = [0x00, 0x41, 0x00, 0xFF, 0x0D, 0x0A, 0x00]
        #expect(try connection.command([Array("SET".utf8), key, value]) == .status("OK"))
        #expect(try connection.command([Array("GET".utf8), key]) == .bulk(value))
        #expect(try connection.command([Array("STRLEN".utf8), key]) == .integer(7))
        #expect(try connection.command([Array("SET".utf8), key, []]) == .status("OK"))
        #expect(try connection.command([Array("GET".utf8), key]) == .bulk([]))
        #expect(try connection.command([Array("DEL".utf8), key]) == .integer(1))
        #expect(try connection.command([Array("GET".utf8), key]) == .null)
    }

    @Test func pipelineRepliesComeBackInOrder() throws {
        let connection = try self.connection()
        let list = self.key("list")
        var commands = (0..<500).map { RedisCommand.arguments("RPUSH", list, [UInt8(truncatingIfNeeded: $0), 0]) }
        commands.append(RedisCommand.arguments("LRANGE", list, 0, 2))
        commands.append(RedisCommand.arguments("DEL", list))
        let replies = try connection.pipeline(commands)
        #expect(replies.count == 502)
        #expect(replies.prefix(500) == ArraySlice((1...500).map { RedisReply.integer($0) }))
        #expect(replies[500] == .array([.bulk([0, 0]), .bulk([1, 0]), .bulk([2, 0])]))
        #expect(replies[501] == .integer(1))
        #expect(try connection.pipeline([]) == [])
    }

    @Test func errorRepliesAreValuesAndLeaveTheConnectionUsable() throws {
        let connection = try self.connection()
        let key = self.key("counter")
        guard case .error(let message) = try connection.command("NOSUCHCOMMAND", "x") else {
            Issue.record("an unknown command should answer an error reply")
            return
        }
        #expect(message.hasPrefix("ERR"))
        let replies = try connection.pipeline([
            RedisCommand.arguments("SET", key, "not a number"),
            RedisCommand.arguments("INCR", key),
            RedisCommand.arguments("GET", key),
            RedisCommand.arguments("DEL", key),
        ])
        #expect(replies[0] == .status("OK"))
        #expect(replies[1].string == nil && "\(replies[1])".contains("not an integer"))
        #expect(replies[2] == .bulk(Array("not a number".utf8)))
        #expect(replies[3] == .integer(1))
        #expect(connection.isConnected)
        #expect(try connection.command("PING") == .status("PONG"))
    }

    @Test func connectionFailureNamesHostAndPortButNeverThePassword() async throws {
        // A port that was free a moment ago: bind, note it, close.
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton).bind(host: "127.0.0.1", port: 0).get()
        let port = channel.localAddress!.port!
        try await channel.close()
        let configuration = RedisConfiguration(host: "127.0.0.1", port: port, password: "hunter2-secret", connectTimeout: .seconds(1))
        let connection = RedisConnection(configuration: configuration, logger: silentRedisLogger)
        let error = #expect(throws: RedisError.self) { try connection.command("PING") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.message.contains("127.0.0.1:\(port)") == true)
        #expect(error?.message.contains("hunter2") == false)
        #expect(!connection.isConnected)
        #expect(!"\(configuration)".contains("hunter2"))
    }

    @Test func refusedAuthIsAConnectionFailureWithoutThePassword() throws {
        var configuration = try self.configuration()
        configuration.password = "hunter2-secret"  // the test server has no password: AUTH is refused
        let connection = RedisConnection(configuration: configuration, logger: silentRedisLogger)
        let error = #expect(throws: RedisError.self) { try connection.command("PING") }
        #expect(error?.code == .connectionFailed)
        #expect(error?.message.contains(configuration.server) == true)
        #expect(error?.message.contains("hunter2") == false)
        #expect(!connection.isConnected)
    }

    @Test func selectsTheConfiguredDatabase() throws {
        var configuration = try self.configuration()
        configuration.database = 3
        let inThree = RedisConnection(configuration: configuration, logger: silentRedisLogger)
        let inZero = try self.connection()
        let key = self.key("db")
        #expect(try inThree.command("SET", key, "three") == .status("OK"))
        #expect(try inZero.command("GET", key) == .null)
        #expect(try inThree.command("GET", key) == .bulk(Array("three".utf8)))
        #expect(try inThree.command("DEL", key) == .integer(1))
    }

    @Test func reconnectsAfterTheServerClosedTheConnection() async throws {
        let client = RedisClient(configuration: try self.configuration(), logger: silentRedisLogger)
        let first = try await client.withConnection { try $0.command("CLIENT", "ID").integer }
        let killer = try self.connection()
        #expect(try killer.command("CLIENT", "KILL", "ID", try #require(first)) == .integer(1))
        // The next command finds the socket closed: it fails, and the context is dropped...
        let error = await #expect(throws: RedisError.self) { try await client.withConnection { try $0.command("PING") } }
        #expect(error?.code == .connectionLost)
        #expect(error?.message.contains(client.configuration.server) == true)
        // ...so the one after that connects again.
        #expect(try await client.withConnection { try $0.command("PING") } == .status("PONG"))
        let second = try await client.withConnection { try $0.command("CLIENT", "ID").integer }
        #expect(second != first)
        try await client.shutdown()
        let afterShutdown = await #expect(throws: RedisError.self) { try await client.withConnection { try $0.command("PING") } }
        #expect(afterShutdown?.code == .clientShutDown)
    }

    @Test func aTimedOutContextIsNeverReused() throws {
        var configuration = try self.configuration()
        configuration.commandTimeout = .milliseconds(200)
        let connection = RedisConnection(configuration: configuration, logger: silentRedisLogger)
        // The server answers BLPOP only after 2 s: the read times out with that reply still due...
        let error = #expect(throws: RedisError.self) { try connection.command("BLPOP", self.key("never"), 2) }
        #expect(error?.code == .connectionLost)
        #expect(error?.message.contains("timeout") == true)
        #expect(!connection.isConnected)
        // ...so a fresh connection answers the next command, not the stale BLPOP reply.
        #expect(try connection.command("ECHO", "fresh") == .bulk(Array("fresh".utf8)))
    }

    @Test func scriptsRunByShaAndFallBackToEvalAfterScriptFlush() throws {
        let connection = try self.connection()
        let script = RedisScript("return {KEYS[1], ARGV[1], 'pushfleet-script-test'}")
        let key = Array(self.key("script").utf8)
        // Our SHA-1 names the script the way Redis does (one block, and several blocks).
        for source in [script.source, "", String(repeating: "-- a comment long enough for more than one block\n", count: 5)] {
            #expect(try connection.command("SCRIPT", "LOAD", source) == .bulk(Array(RedisScript(source).sha1.utf8)))
        }
        #expect(try connection.command("SCRIPT", "FLUSH") == .status("OK"))
        let expected = RedisReply.array([.bulk(key), .bulk([0, 1]), .bulk(Array("pushfleet-script-test".utf8))])
        #expect(try connection.evaluate(script, keys: [key], arguments: [[0, 1]]) == expected)  // NOSCRIPT → EVAL
        #expect(try connection.command("SCRIPT", "EXISTS", script.sha1) == .array([.integer(1)]))
        #expect(try connection.evaluate(script, keys: [key], arguments: [[0, 1]]) == expected)  // EVALSHA
        guard case .error = try connection.evaluate(RedisScript("return redis.call('NOSUCH')"), keys: [], arguments: []) else {
            Issue.record("a failing script should answer an error reply")
            return
        }
    }
}

/// Keeps expected reconnect warnings out of the test output.
let silentRedisLogger = Logger(label: "pushfleet.redis.test", factory: { _ in SwiftLogNoOpLogHandler() })
