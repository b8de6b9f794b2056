import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetServices
import PushFleetTestSupport
import Testing

/// A personalized launch files each recipient's values with its token, in Redis' shard lists and in
/// Postgres' copy, whatever the duplicates and however batches and shards cut the audience: the
/// launcher copies values a run of recipients at a time, and a run ends at a duplicate, a shard's
/// end and a batch's end.
@Suite struct LauncherValuesTests {
    /// An audience read in batches of `batch`, each recipient's values beside its token.
    private struct Recipients: TokenSource {
        var left: [(token: DeviceToken, values: [UInt8])]
        let batch: Int
        private(set) var batchValues: RecipientValueList?

        init(_ recipients: [(token: DeviceToken, values: [UInt8])], batch: Int) {
            self.left = recipients
            self.batch = batch
        }

        mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
            let taken = self.left.prefix(min(maximum, self.batch))
            self.left.removeFirst(taken.count)
            self.batchValues = RecipientValueList(taken.map(\.values))
            return taken.map(\.token)
        }
    }

    /// Batches of 1 and 2 put duplicates first and last in batches and end shards on a batch's
    /// last line; of 258, the first shard ends on the first batch's last line and the next
    /// batch starts with a duplicate; of 1,000, runs go across shard ends inside a batch.
    @Test(arguments: [1, 2, 258, 1_000])
    func eachRecipientKeepsItsFirstLinesValuesThroughDuplicatesBatchesAndShards(batch: Int) async throws {
        let unique = TestTokens.tokens(2_600, seed: 41)
        // Values of 0 to 299 bytes (a two-byte length from 128 on), different for every line.
        var line = 0
        func values() -> [UInt8] {
            defer { line += 1 }
            return (0..<(line * 37 % 300)).map { UInt8(truncatingIfNeeded: line &+ $0) }
        }
        var audience: [(token: DeviceToken, values: [UInt8])] = []
        var expected: [(token: DeviceToken, values: [UInt8])] = []
        for (index, token) in unique.enumerated() {
            let first = (token, values())
            audience.append(first)
            expected.append(first)
            // Duplicates (with values of their own, which must not be used) one, two and three in
            // a row, after the first and last recipients of shards of 250, and here and there.
            if [0, 249, 250, 499, 999, 1_000, 1_234, 1_999, 2_599].contains(index) || index % 97 == 0 {
                for _ in 0..<(1 + index % 3) { audience.append((token, values())) }
            }
            if index % 113 == 0, index > 0 { audience.append((unique[index - 1], values())) }
        }
        var source = Recipients(audience, batch: batch)
        let client = RedisClient(configuration: try RedisConfiguration(url: try IntegrationEnvironment.redisURL()), logger: silentRedisLogger)
        let queue = CampaignQueue(client: client)
        try await PostgresFixture.withStore { store async throws in
            let topic = PostgresFixture.topic("launcher-values")
            var request = Launcher.Request(
                definition: CampaignDefinition(topic: topic, environment: .sandbox, payload: Array(#"{"aps":{"alert":"Hi {{name}}"}}"#.utf8)),
                shardSize: 250
            )
            request.definition.personalized = true
            let result = try await Launcher(queue: queue, store: store).launch(request, tokens: &source)
            #expect(result.total == unique.count)
            #expect(result.duplicatesDropped == audience.count - unique.count)
            #expect(result.shardCount == 11)

            let stored = try await store.shardRecipients(campaign: result.id, shards: Array(0..<result.shardCount))
            let storedTokens = (0..<result.shardCount).flatMap { stored[$0]?.tokens ?? [] }
            let storedValues = (0..<result.shardCount).flatMap { stored[$0]?.values?.arrays ?? [] }
            #expect(storedTokens == expected.map(\.token), "Postgres' tokens")
            #expect(storedValues == expected.map(\.values), "Postgres' values")

            var listed: [(token: DeviceToken, values: [UInt8])] = []
            for shard in 0..<result.shardCount {
                let key = "pf:{\(result.id.uuidString.lowercased())}:s:\(shard)"
                let entries = try await client.withConnection { try $0.command("LRANGE", key, 0, -1).array ?? [] }
                for entry in entries { listed.append(try #require(entry.bytes.flatMap(ShardEntry.decode), "an entry of shard \(shard)")) }
            }
            #expect(listed.map(\.token) == expected.map(\.token), "Redis' tokens")
            #expect(listed.map(\.values) == expected.map(\.values), "Redis' values")
            try await queue.remove(campaign: result.id, topic: topic, environment: .sandbox)
        }
        try await client.shutdown()
    }
}
