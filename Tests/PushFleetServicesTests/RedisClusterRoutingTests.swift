import Foundation
@testable import PushFleetRedis
import Testing

/// Redis Cluster routing without a server: hash slots, which key routes a command, the slot map
/// and redirect replies.
@Suite struct RedisClusterRoutingTests {
    private func slot(_ key: String) -> Int { RedisClusterSlot.of(Array(key.utf8)) }

    @Test func slotsAreTheClusterSpecificationsCRC16() {
        // The specification's check value, and slots redis-cli's CLUSTER KEYSLOT gives.
        #expect(RedisClusterSlot.crc16(Array("123456789".utf8)) == 0x31C3)
        #expect(self.slot("foo") == 12182)
        #expect(self.slot("bar") == 5061)
        #expect(self.slot("hello") == 866)
        #expect(self.slot("") == 0)
    }

    @Test func onlyTheHashTagIsHashed() {
        #expect(self.slot("{user1000}.following") == self.slot("{user1000}.followers"))
        #expect(self.slot("{user1000}.following") == self.slot("user1000"))
        // The specification's edge cases: an empty tag hashes the whole key; the first `{` and the
        // next `}` delimit it.
        #expect(self.slot("foo{}{bar}") == RedisClusterSlot.of(Array("foo{}{bar}".utf8)))
        #expect(String(decoding: RedisClusterSlot.hashed(Array("foo{}{bar}".utf8)), as: UTF8.self) == "foo{}{bar}")
        #expect(String(decoding: RedisClusterSlot.hashed(Array("foo{{bar}}zap".utf8)), as: UTF8.self) == "{bar")
        #expect(String(decoding: RedisClusterSlot.hashed(Array("foo{bar}{zap}".utf8)), as: UTF8.self) == "bar")
        #expect(String(decoding: RedisClusterSlot.hashed(Array("no tag}{".utf8)), as: UTF8.self) == "no tag}{")
    }

    @Test func everyKeyOfACampaignIsInOneSlot() {
        let campaign = UUID()
        let keys = CampaignKeys(campaign)
        let expected = self.slot(campaign.uuidString.lowercased())
        let all = keys.fixed + [keys.shard(0), keys.shard(99_999), keys.staged(3, launch: "a-launch")]
        for key in all {
            #expect(RedisClusterSlot.of(key) == expected, "\(String(decoding: key, as: UTF8.self))")
        }
        // ...and its SCAN pattern routes to that slot's node.
        #expect(RedisRoute([Array("SCAN".utf8), Array("0".utf8), Array("MATCH".utf8), keys.pattern]) == .slot(expected))
    }

    @Test func commandsRouteByTheirKey() {
        func route(_ words: String...) -> RedisRoute? { RedisRoute(words.map { Array($0.utf8) }) }
        #expect(route("GET", "foo") == .slot(12182))
        #expect(route("hget", "{foo}:meta", "status") == .slot(12182))
        #expect(route("DEL", "bar", "x") == .slot(5061))
        #expect(route("EVALSHA", "abc", "2", "foo", "{foo}x", "argument") == .slot(12182))
        #expect(route("EVAL", "return 1", "0") == .anyNode)
        #expect(route("EVAL", "return 1", "2") == nil)
        #expect(route("EVAL", "return 1") == nil)
        #expect(route("XREADGROUP", "GROUP", "g", "c", "COUNT", "5", "STREAMS", "hello", ">") == .slot(866))
        #expect(route("MIGRATE", "10.0.0.2", "7001", "foo", "0", "5000") == .slot(12182))
        #expect(route("MIGRATE", "10.0.0.2", "7001", "", "0", "5000", "REPLACE", "KEYS", "bar", "{bar}2") == .slot(5061))
        #expect(route("PING") == .anyNode)
        #expect(route("SCRIPT", "LOAD", "return 1") == .anyNode)
        #expect(route("CLUSTER", "SLOTS") == .anyNode)
        #expect(route("TIME") == .anyNode)
        #expect(route("SCAN", "0", "MATCH", "pf:{bar}:*", "COUNT", "10") == .slot(5061))
        #expect(route("KEYS", "pf:{bar}*") == .slot(5061))
        // Patterns that could match keys of several slots have no single node.
        #expect(route("SCAN", "0", "MATCH", "pf:*") == nil)
        #expect(route("SCAN", "0") == nil)
        #expect(route("SCAN", "0", "MATCH", "pf:{ba*}:x") == nil)
        #expect(route("SCAN", "0", "MATCH", "*{bar}") == nil)
        #expect(route("KEYS", "*") == nil)
        #expect(route("MULTI") == nil)
        #expect(route("WATCH", "foo") == nil)
    }

    @Test func theSlotMapIsReadFromClusterSlots() throws {
        func node(_ host: String, _ port: Int) -> RedisReply {
            .array([.bulk(Array(host.utf8)), .integer(port), .bulk(Array("id".utf8)), .array([])])
        }
        let reply = RedisReply.array([
            .array([.integer(0), .integer(5460), node("10.0.0.1", 7000), node("10.0.0.4", 7003)]),
            .array([.integer(5461), .integer(10922), node("", 7001)]),
            .array([.integer(10923), .integer(16383), node("?", 7002)]),
        ])
        let map = try #require(RedisClusterMap(slotsReply: reply, askedHost: "10.0.0.9"))
        #expect(map.assignedSlots == 16_384)
        #expect(map.master(of: 0) == .init(host: "10.0.0.1", port: 7000))
        #expect(map.master(of: 5460) == .init(host: "10.0.0.1", port: 7000))
        // An empty or unknown endpoint means the node that was asked.
        #expect(map.master(of: 5461) == .init(host: "10.0.0.9", port: 7001))
        #expect(map.master(of: 16383) == .init(host: "10.0.0.9", port: 7002))
        #expect(map.masters.count == 3)

        var partial = try #require(RedisClusterMap(slotsReply: .array([.array([.integer(5), .integer(6), node("h", 1)])]), askedHost: "x"))
        #expect(partial.assignedSlots == 2)
        #expect(partial.master(of: 4) == nil)
        partial.assign(4, to: .init(host: "h", port: 1))
        #expect(partial.master(of: 4) == .init(host: "h", port: 1))
        #expect(partial.masters.count == 1)

        // Redis 7's unknown endpoint (NULL), and `?` with the node's ip in the metadata.
        let unknown = RedisReply.array([.null, .integer(7004), .bulk(Array("id".utf8)), .array([])])
        let unnamed = RedisReply.array([
            .bulk(Array("?".utf8)), .integer(7005), .bulk(Array("id".utf8)),
            .array([.bulk(Array("ip".utf8)), .bulk(Array("10.0.0.7".utf8))]),
        ])
        let endpoints = try #require(RedisClusterMap(
            slotsReply: .array([.array([.integer(0), .integer(0), unknown]), .array([.integer(1), .integer(1), unnamed])]), askedHost: "10.0.0.9"
        ))
        #expect(endpoints.master(of: 0) == .init(host: "10.0.0.9", port: 7004))
        #expect(endpoints.master(of: 1) == .init(host: "10.0.0.7", port: 7005))

        #expect(RedisClusterMap(slotsReply: .error("ERR This instance has cluster support disabled"), askedHost: "x") == nil)
        #expect(RedisClusterMap(slotsReply: .array([.array([.integer(9), .integer(3), node("h", 1)])]), askedHost: "x") == nil)
        #expect(RedisClusterMap(slotsReply: .array([.array([.integer(0), .integer(16_384), node("h", 1)])]), askedHost: "x") == nil)
        #expect(RedisClusterMap(slotsReply: .array([.array([.integer(0), .integer(1), node("h", 0)])]), askedHost: "x") == nil)
        #expect(RedisClusterMap(slotsReply: .array([.array([.integer(0), .integer(1)])]), askedHost: "x") == nil)
    }

    @Test func redirectsAreParsed() throws {
        let moved = try #require(RedisRedirect(.error("MOVED 3999 127.0.0.1:6381"), askedHost: "x"))
        #expect(moved.kind == .moved && moved.slot == 3999)
        #expect(moved.address == RedisClusterMap.Address(host: "127.0.0.1", port: 6381))
        let ask = try #require(RedisRedirect(.error("ASK 12 :7000"), askedHost: "10.1.1.1"))
        #expect(ask.kind == .ask && ask.slot == 12)
        #expect(ask.address == RedisClusterMap.Address(host: "10.1.1.1", port: 7000))
        #expect(RedisRedirect(.error("MOVED 1 ::1:7000"), askedHost: "x")?.address == .init(host: "::1", port: 7000))
        #expect(RedisRedirect(.error("MOVED 1 [::1]:7000"), askedHost: "x")?.address == .init(host: "::1", port: 7000))
        #expect(RedisRedirect(.error("ERR unknown command"), askedHost: "x") == nil)
        #expect(RedisRedirect(.error("MOVED abc host:1"), askedHost: "x") == nil)
        #expect(RedisRedirect(.error("MOVED 16384 host:1"), askedHost: "x") == nil)
        #expect(RedisRedirect(.error("MOVED 1 host"), askedHost: "x") == nil)
        #expect(RedisRedirect(.status("MOVED 1 host:1"), askedHost: "x") == nil)
        #expect(RedisRedirect(.error("TRYAGAIN Multiple keys request during rehashing of slot"), askedHost: "x") == nil)
    }
}
