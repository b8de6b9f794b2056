import Foundation
@testable import PushFleetRedis
import PushFleetTestSupport
import Testing

/// ``RedisConnection`` on the 3-master Redis Cluster of `scripts/test.sh`: it finds the masters,
/// sends each command to its slot's master, splits pipelines, and follows `ASK` while a slot
/// migrates and `MOVED` after it moved. Serialized: one test moves a slot between masters.
@Suite(.serialized) struct RedisClusterTests {
    private func connection() throws -> RedisConnection {
        RedisConnection(configuration: try RedisConfiguration(url: try IntegrationEnvironment.redisClusterURL()), logger: silentRedisLogger)
    }

    /// A connection to one node only, with no routing: what that node itself answers.
    private func node(_ address: String) throws -> RedisNode {
        RedisNode(configuration: try RedisConfiguration(url: "redis://\(address)"), logger: silentRedisLogger)
    }

    @Test func aStandaloneRedisIsNotTakenForACluster() throws {
        let connection = RedisConnection(configuration: try RedisConfiguration(url: try IntegrationEnvironment.redisURL()), logger: silentRedisLogger)
        #expect(try connection.command("PING") == .status("PONG"))
        #expect(!connection.isCluster)
        #expect(connection.clusterMasters.isEmpty)
    }

    @Test func commandsAndPipelinesReachTheMasterOfEachKey() throws {
        let connection = try self.connection()
        #expect(try connection.command("PING") == .status("PONG"))
        #expect(connection.isCluster)
        let masters = connection.clusterMasters
        #expect(masters.count == 3)

        let run = UUID().uuidString.lowercased()
        let keys = (0..<90).map { "pf:test:\(run):\($0)" }
        // Pipelined writes over every master, then reads, replies in the order sent.
        let writes = try connection.pipeline(keys.enumerated().map { RedisCommand.arguments("SET", $0.element, "value \($0.offset)") })
        #expect(writes.allSatisfy { $0 == .status("OK") })
        let reads = try connection.pipeline(keys.map { RedisCommand.arguments("GET", $0) })
        #expect(reads == keys.indices.map { .bulk(Array("value \($0)".utf8)) })
        #expect(try connection.command("GET", keys[17]) == .bulk(Array("value 17".utf8)))

        // Each key is on exactly one master, which holds it; the others redirect. All three hold some.
        var perMaster: [String: Int] = [:]
        let nodes = try masters.map { (address: $0, node: try self.node($0)) }
        for key in keys {
            var holders: [String] = []
            for (address, node) in nodes {
                let reply = try node.command(RedisCommand.arguments("EXISTS", key))
                if reply == .integer(1) { holders.append(address) } else { #expect(RedisRedirect(reply, askedHost: "") != nil, "\(reply)") }
            }
            #expect(holders.count == 1)
            if let holder = holders.first { perMaster[holder, default: 0] += 1 }
        }
        #expect(perMaster.count == 3)
        // ...and the connection sent each command straight there, by its map: nothing was redirected.
        for key in keys.prefix(30) {
            _ = try connection.command("GET", key)
            #expect(connection.lastServer == perMasterOwner(key, nodes))
        }
        #expect(connection.redirectsFollowed == 0)
        #expect(try connection.pipeline(keys.map { RedisCommand.arguments("DEL", $0) }).allSatisfy { $0 == .integer(1) })

        // A command that names no single slot is refused here, not sent to one node.
        let error = #expect(throws: RedisError.self) { try connection.command("SCAN", "0", "MATCH", "pf:*") }
        #expect(error?.code == .notRoutable)
        // Keys of two slots in one command: Redis' own CROSSSLOT.
        #expect(try connection.command("DEL", "pf:test:a", "pf:test:b").description.contains("CROSSSLOT"))
    }

    /// Commands written already (``RedisCommands``): in one slot they go to its master as they
    /// are, and over several they are split by master; replies in the order sent either way, and
    /// nothing redirected.
    @Test func writtenCommandsReachTheMasterOfEachKey() throws {
        let connection = try self.connection()
        let run = UUID().uuidString.lowercased()
        // A campaign's shape: keys of one hash tag, a list written by a long RPUSH.
        let tagged = (0..<5).map { "pf:{\(run)}:s:\($0)" }
        var oneSlot = RedisCommands()
        for key in tagged {
            oneSlot.append([Array("DEL".utf8), Array(key.utf8)])
            oneSlot.append([Array("RPUSH".utf8), Array(key.utf8)] + (0..<300).map { Array("entry \($0)".utf8) })
        }
        oneSlot.append(RedisCommand.arguments("LLEN", tagged[3]))
        let replies = try connection.pipeline(oneSlot)
        #expect(replies.count == 11)
        #expect(replies.last == .integer(300))
        #expect(try connection.command("LINDEX", tagged[4], 299) == .bulk(Array("entry 299".utf8)))

        let spread = (0..<30).map { "pf:test:\(run):\($0)" }
        let written = try connection.pipeline(RedisCommands(spread.enumerated().map { RedisCommand.arguments("SET", $0.element, "value \($0.offset)") }))
        #expect(written.allSatisfy { $0 == .status("OK") })
        let read = try connection.pipeline(RedisCommands(spread.map { RedisCommand.arguments("GET", $0) }))
        #expect(read == spread.indices.map { .bulk(Array("value \($0)".utf8)) })
        #expect(connection.redirectsFollowed == 0)
        _ = try connection.pipeline(RedisCommands((tagged + spread).map { RedisCommand.arguments("DEL", $0) }))
    }

    @Test func followsAskWhileASlotMigratesAndMovedAfterwards() throws {
        let connection = try self.connection()
        let run = UUID().uuidString.lowercased()
        let old = "pf:{\(run)}:old", new = "pf:{\(run)}:new", elsewhere = "pf:test:\(run):elsewhere"
        let slot = RedisClusterSlot.of(Array(run.utf8))
        #expect(try connection.command("SET", old, "before") == .status("OK"))
        let setAt = connection.lastServer
        #expect(try connection.command("SET", elsewhere, "other slot") == .status("OK"))
        let source = try self.owner(of: slot, connection)
        #expect(setAt == source)
        let masters = connection.clusterMasters
        let target = try #require(masters.first { $0 != source })
        let (sourceNode, targetNode) = (try self.node(source), try self.node(target))
        let (sourceID, targetID) = (try self.id(sourceNode), try self.id(targetNode))
        defer {
            // Should an expectation throw midway, leave no slot half-migrated for the other suites.
            for node in [sourceNode, targetNode] { _ = try? node.command(RedisCommand.arguments("CLUSTER", "SETSLOT", slot, "STABLE")) }
        }

        // Migrating: a key the source no longer has is answered ASK; ASKING then the command at the target.
        try self.move(slot, from: (sourceNode, sourceID), to: (targetNode, targetID), keys: [old])
        #expect(try connection.command("SET", new, "during") == .status("OK"))
        #expect(try connection.command("GET", old) == .bulk(Array("before".utf8)))
        #expect(connection.lastServer == target)
        #expect(try connection.pipeline([
            RedisCommand.arguments("GET", old), RedisCommand.arguments("GET", elsewhere), RedisCommand.arguments("GET", new),
        ]) == [.bulk(Array("before".utf8)), .bulk(Array("other slot".utf8)), .bulk(Array("during".utf8))])
        #expect(try targetNode.command(RedisCommand.arguments("CLUSTER", "COUNTKEYSINSLOT", slot)) == .integer(2))
        #expect(try sourceNode.command(RedisCommand.arguments("CLUSTER", "COUNTKEYSINSLOT", slot)) == .integer(0))

        // Moved: the map this connection holds is out of date; MOVED, first inside a pipeline,
        // sends the commands to the target for good.
        try self.finish(slot, at: (targetNode, targetID), others: try masters.filter { $0 != target }.map { try self.node($0) })
        let redirectsBefore = connection.redirectsFollowed
        #expect(try connection.pipeline([
            RedisCommand.arguments("GET", new), RedisCommand.arguments("GET", elsewhere), RedisCommand.arguments("GET", old),
        ]) == [.bulk(Array("during".utf8)), .bulk(Array("other slot".utf8)), .bulk(Array("before".utf8))])
        #expect(connection.redirectsFollowed == redirectsBefore + 2)
        #expect(try connection.command("GET", new) == .bulk(Array("during".utf8)))
        #expect(connection.lastServer == target)
        #expect(connection.redirectsFollowed == redirectsBefore + 2)
        #expect(try self.owner(of: slot, connection) == target)
        #expect(try connection.pipeline([RedisCommand.arguments("DEL", old), RedisCommand.arguments("DEL", new)]) == [.integer(1), .integer(1)])
        #expect(try connection.command("DEL", elsewhere) == .integer(1))

        // Put the slot back where it was (empty now), as the other tests found it.
        try self.move(slot, from: (targetNode, targetID), to: (sourceNode, sourceID), keys: [])
        try self.finish(slot, at: (sourceNode, sourceID), others: try masters.filter { $0 != source }.map { try self.node($0) })
        #expect(try connection.command("SET", old, "back") == .status("OK"))
        #expect(connection.lastServer == source)
        #expect(try connection.command("DEL", old) == .integer(1))
    }

    /// The address of the node in `nodes` that answers `EXISTS key` itself rather than redirecting.
    private func perMasterOwner(_ key: String, _ nodes: [(address: String, node: RedisNode)]) -> String? {
        nodes.first { (try? $0.node.command(RedisCommand.arguments("EXISTS", key))) == .integer(1) }?.address
    }

    private func owner(of slot: Int, _ connection: RedisConnection) throws -> String {
        let reply = try connection.command("CLUSTER", "SLOTS")
        let map = try #require(RedisClusterMap(slotsReply: reply, askedHost: "127.0.0.1"))
        return try #require(map.master(of: slot)).description
    }

    private func id(_ node: RedisNode) throws -> String {
        try #require(try node.command(RedisCommand.arguments("CLUSTER", "MYID")).string)
    }

    /// Starts moving `slot` the way `redis-cli --cluster reshard` does, and migrates `keys`.
    private func move(_ slot: Int, from source: (RedisNode, String), to target: (RedisNode, String), keys: [String]) throws {
        #expect(try target.0.command(RedisCommand.arguments("CLUSTER", "SETSLOT", slot, "IMPORTING", source.1)) == .status("OK"))
        #expect(try source.0.command(RedisCommand.arguments("CLUSTER", "SETSLOT", slot, "MIGRATING", target.1)) == .status("OK"))
        for key in keys {
            let migrate = RedisCommand.arguments("MIGRATE", target.0.configuration.host, target.0.configuration.port, key, 0, 5000)
            #expect(try source.0.command(migrate) == .status("OK"))
        }
    }

    /// Ends a migration: the new owner first (it bumps its epoch), then every other master.
    private func finish(_ slot: Int, at owner: (RedisNode, String), others: [RedisNode]) throws {
        for node in [owner.0] + others {
            #expect(try node.command(RedisCommand.arguments("CLUSTER", "SETSLOT", slot, "NODE", owner.1)) == .status("OK"))
        }
    }
}
