import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetTestSupport
import Testing

/// Postgres keeps every campaign's audience beside Redis' queue: each shard as the launch that
/// published it read it, and nothing of launches that did not.
@Suite struct ShardTokenStoreTests {
    /// Tokens of every length APNs may use, 1 to 255 bytes.
    private static func tokens(_ count: Int, seed: UInt8) throws -> [DeviceToken] {
        try (0..<count).map { index in
            let length = [1, 32, 64, 100, 255][index % 5]
            return try DeviceToken(bytes: (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index &* 7 &+ Int(seed)) })
        }
    }

    @Test func theRecordedLaunchsShardsComeBackAndNoOtherLaunchs() async throws {
        try await PostgresFixture.withStore { store async throws in
            let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("shard-tokens"), shards: 2, perShard: 10)
            #expect(try await store.createCampaign(campaign))
            let mine = [try Self.tokens(10, seed: 1), try Self.tokens(10, seed: 2)]
            let theirs = [try Self.tokens(10, seed: 3), try Self.tokens(10, seed: 4)]
            try await store.storeShardTokens(campaign: campaign.id, launch: "mine", shards: [(0, mine[0]), (1, mine[1])])
            try await store.storeShardTokens(campaign: campaign.id, launch: "theirs", shards: [(0, theirs[0]), (1, theirs[1])])
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 0) == nil, "no launch recorded yet")

            try await store.recordLaunch(campaign.id, launch: "mine")
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 0) == mine[0])
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 1) == mine[1])
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 2) == nil)

            // The losing launch's rows go at the next prune; the campaign's stay until its queue is removed.
            _ = try await store.pruneShardTokens()
            try await store.recordLaunch(campaign.id, launch: "theirs")
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 0) == nil, "pruned as another launch's")
            try await store.recordLaunch(campaign.id, launch: "mine")
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 1) == mine[1])

            try await store.markQueueRemoved(campaign.id)
            #expect(try await store.shardTokens(campaign: campaign.id, shard: 1) == nil, "deleted with the queue")
        }
    }

    /// A personalized campaign's shards keep each recipient's packed values with its token, of any
    /// size (a two-byte length at 128 and more, none at all); stored again without values, a shard
    /// has none.
    @Test func aPersonalizedShardKeepsEachRecipientsValues() async throws {
        try await PostgresFixture.withStore { store async throws in
            let campaign = PostgresFixture.campaign(topic: PostgresFixture.topic("shard-values"), shards: 2, perShard: 10)
            #expect(try await store.createCampaign(campaign))
            let tokens = [try Self.tokens(10, seed: 11), try Self.tokens(10, seed: 12)]
            let values: [[[UInt8]]] = (0..<2).map { shard in
                (0..<10).map { index in Array(repeating: UInt8(shard * 10 + index), count: [0, 1, 127, 128, 300][index % 5]) }
            }
            try await store.storeShardTokens(
                campaign: campaign.id, launch: "l", shards: [(0, tokens[0]), (1, tokens[1])], values: values.map(RecipientValueList.init)
            )
            try await store.recordLaunch(campaign.id, launch: "l")
            let read = try await store.shardRecipients(campaign: campaign.id, shards: [0, 1])
            #expect(read[0]?.tokens == tokens[0] && read[1]?.tokens == tokens[1])
            #expect(read[0]?.values?.arrays == values[0] && read[1]?.values?.arrays == values[1])

            try await store.storeShardTokens(campaign: campaign.id, launch: "l", shards: [(1, tokens[1])])
            let again = try await store.shardRecipients(campaign: campaign.id, shards: [1])
            #expect(again[1]?.tokens == tokens[1])
            #expect(again[1].map { $0.values == nil } == true, "stored again without values")
        }
    }

    /// A small launch's one statement: the campaign, its shards' tokens and the launch together,
    /// for an app new to the database and for one it knows; a second launch of the same id
    /// changes nothing, its tokens included.
    @Test func aCampaignCreatedWithItsTokensRecordsThemAndItsLaunch() async throws {
        try await PostgresFixture.withStore { store async throws in
            let topic = PostgresFixture.topic("shard-tokens-together")
            for _ in 0..<2 {
                let campaign = PostgresFixture.campaign(topic: topic, shards: 2, perShard: 10)
                let mine = [try Self.tokens(10, seed: 5), try Self.tokens(10, seed: 6)]
                #expect(try await store.createCampaign(campaign, tokens: ("mine", [(0, mine[0]), (1, mine[1])])))
                #expect(try await store.shardTokens(campaign: campaign.id, shard: 0) == mine[0])
                #expect(try await store.shardTokens(campaign: campaign.id, shard: 1) == mine[1])
                #expect(try await store.campaign(campaign.id)?.state == .pending)

                let theirs = [try Self.tokens(10, seed: 7), try Self.tokens(10, seed: 8)]
                #expect(try await !store.createCampaign(campaign, tokens: ("theirs", [(0, theirs[0]), (1, theirs[1])])))
                try await store.recordLaunch(campaign.id, launch: "theirs")
                #expect(try await store.shardTokens(campaign: campaign.id, shard: 0) == nil, "the second launch stored nothing")
            }
        }
    }

    @Test func aLaunchStoresEveryShardAsItQueuedIt() async throws {
        let redis = try IntegrationEnvironment.redisURL()
        let postgres = try IntegrationEnvironment.postgresURL()
        let tokens = (0..<2_345).map { TestTokens.token($0, seed: UInt64.random(in: 1...UInt64.max)) }
        let file = NSTemporaryDirectory() + "pushfleet-shard-tokens-\(UUID().uuidString).txt"
        try (tokens.map(\.hexString) + [tokens[7].hexString]).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let id = UUID()
        let launched = try await PushFleetProcess.run(
            ["launch", "--topic", PostgresFixture.topic("shard-tokens"), "--tokens", file, "--payload", #"{"aps":{"alert":"hi"}}"#,
             "--shard-size", "1000", "--campaign-id", id.uuidString, "--redis", redis, "--postgres", postgres]
        )
        #expect(launched.status == 0, "\(launched.error)")
        try await PostgresFixture.withStore { store async throws in
            var stored: [DeviceToken] = []
            for shard in 0..<3 { stored += try #require(try await store.shardTokens(campaign: id, shard: shard)) }
            #expect(stored == tokens, "the audience in file order, the duplicate dropped")
            #expect(try await store.shardTokens(campaign: id, shard: 3) == nil)
        }
        _ = try await PushFleetProcess.run(["campaign", "cancel", id.uuidString, "--redis", redis, "--postgres", postgres])
    }
}
