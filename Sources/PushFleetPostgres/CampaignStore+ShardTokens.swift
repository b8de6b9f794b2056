public import Foundation
public import PushFleetCore
import PostgresNIO

/// The durable copy of each campaign's audience: every shard's tokens as the launch that published
/// it read them, beside Redis' queue, so that a queue Redis lost can be rebuilt.
extension CampaignStore {
    /// Stores shards' tokens as `launch` read them (one row per shard, in one statement). Storing
    /// a shard again replaces it.
    ///
    /// A personalized campaign's shards come with `values`: per shard, per token, the recipient's
    /// packed template values, stored with them.
    public func storeShardTokens(
        campaign: UUID, launch: String, shards: [(shard: Int, tokens: [DeviceToken])], values: [RecipientValueList]? = nil
    ) async throws {
        guard !shards.isEmpty else { return }
        let ids = shards.map(\.shard)
        let packed = PackedShards(shards.map(\.tokens))
        _ = try await self.withConnection("store the tokens of \(shards.count) shards of campaign \(campaign)") { connection in
            if let values {
                try await connection.query(
                    """
                    INSERT INTO campaign_shard_tokens (campaign_id, launch, shard, tokens, recipient_values)
                    SELECT \(campaign), \(launch), u.shard, u.tokens, u.recipient_values
                    FROM unnest(\(ids), \(packed), \(PackedValues(values))) AS u(shard, tokens, recipient_values)
                    ON CONFLICT (campaign_id, launch, shard) DO UPDATE SET tokens = EXCLUDED.tokens, recipient_values = EXCLUDED.recipient_values
                    """,
                    logger: self.logger
                )
            } else {
                try await connection.query(
                    """
                    INSERT INTO campaign_shard_tokens (campaign_id, launch, shard, tokens)
                    SELECT \(campaign), \(launch), u.shard, u.tokens FROM unnest(\(ids), \(packed)) AS u(shard, tokens)
                    ON CONFLICT (campaign_id, launch, shard) DO UPDATE SET tokens = EXCLUDED.tokens, recipient_values = NULL
                    """,
                    logger: self.logger
                )
            }
        }
    }

    /// Records that the campaign's shards are those `launch` stored (the launch that published it).
    public func recordLaunch(_ id: UUID, launch: String) async throws {
        _ = try await self.withWrite("record the launch of campaign \(id)") { connection in
            try await connection.query(
                "UPDATE campaigns SET launch = \(launch) WHERE campaign_id = \(id) AND launch IS DISTINCT FROM \(launch)",
                logger: self.logger
            )
        }
    }

    /// The tokens of one shard of the campaign, as the launch recorded with ``recordLaunch(_:launch:)``
    /// stored them; nil when no launch is recorded or the shard is not stored.
    /// - Throws: ``PostgresStoreError`` with code `queryFailed` when the stored bytes are not packed tokens.
    public func shardTokens(campaign: UUID, shard: Int) async throws -> [DeviceToken]? {
        try await self.shardTokens(campaign: campaign, shards: [shard])[shard]
    }

    /// The tokens of some shards of the campaign, as the recorded launch stored them, by shard id;
    /// a shard not stored (or no launch recorded) is absent.
    /// - Throws: ``PostgresStoreError`` with code `queryFailed` when the stored bytes are not packed tokens.
    public func shardTokens(campaign: UUID, shards: [Int]) async throws -> [Int: [DeviceToken]] {
        try await self.shardRecipients(campaign: campaign, shards: shards).mapValues(\.tokens)
    }

    /// The tokens of some shards of the campaign and, for a personalized campaign, each token's
    /// packed values, as the recorded launch stored them, by shard id; a shard not stored (or no
    /// launch recorded) is absent.
    /// - Throws: ``PostgresStoreError`` with code `queryFailed` when the stored bytes are not
    ///   packed tokens, or not packed values one per token.
    public func shardRecipients(campaign: UUID, shards: [Int]) async throws -> [Int: (tokens: [DeviceToken], values: RecipientValueList?)] {
        let operation = "read the tokens of \(shards.count) shards of campaign \(campaign)"
        let endpoint = self.configuration.endpoint
        return try await self.withConnection(operation) { connection -> [Int: (tokens: [DeviceToken], values: RecipientValueList?)] in
            let rows = try await connection.query(
                """
                SELECT t.shard, t.tokens, t.recipient_values FROM campaign_shard_tokens t
                JOIN campaigns c ON c.campaign_id = t.campaign_id AND c.launch = t.launch
                WHERE t.campaign_id = \(campaign) AND t.shard = ANY(\(shards))
                """,
                logger: self.logger
            )
            var found: [Int: (tokens: [DeviceToken], values: RecipientValueList?)] = [:]
            for try await (shard, bytes, packedValues) in rows.decode((Int, ByteBuffer, ByteBuffer?).self) {
                guard let tokens = PackedShards.unpack(bytes) else {
                    throw PostgresStoreError.queryFailed(
                        endpoint, operation, "the stored bytes of shard \(shard) (\(bytes.readableBytes)) are not packed tokens"
                    )
                }
                var values: RecipientValueList? = nil
                if let packedValues {
                    guard let unpacked = RecipientValueList(packed: Array(packedValues.readableBytesView)), unpacked.count == tokens.count else {
                        throw PostgresStoreError.queryFailed(
                            endpoint, operation,
                            "the stored values of shard \(shard) (\(packedValues.readableBytes) bytes) are not one packing per token of its \(tokens.count)"
                        )
                    }
                    values = unpacked
                }
                found[shard] = (tokens, values)
            }
            return found
        }
    }

    /// Deletes the tokens `launch` stored for the campaign (a launch that failed or lost the race).
    public func discardShardTokens(campaign: UUID, launch: String) async throws {
        _ = try await self.withConnection("discard the tokens launch \(launch) stored for campaign \(campaign)") { connection in
            try await connection.query(
                "DELETE FROM campaign_shard_tokens WHERE campaign_id = \(campaign) AND launch = \(launch)", logger: self.logger
            )
        }
    }

    /// Deletes a campaign `launch` created and never published (still `pending` and naming that
    /// launch), with its shards and stored tokens: what a launch whose Redis staging failed after
    /// its row was written leaves behind.
    public func discardUnpublishedCampaign(_ id: UUID, launch: String) async throws {
        _ = try await self.withConnection("discard the unpublished campaign \(id)") { connection in
            try await connection.query(
                "DELETE FROM campaigns WHERE campaign_id = \(id) AND state = 'pending' AND launch = \(launch)", logger: self.logger
            )
        }
    }

    /// Deletes stored tokens nobody will read: those of finished campaigns whose queue is removed,
    /// those of launches that did not become their campaign, and, after `abandonedAfter`, those of
    /// launches whose campaign was never recorded (killed while reading the audience). A
    /// notification's devices are kept: its per-device outcomes are read from them.
    /// - Returns: how many shard rows were deleted.
    public func pruneShardTokens(abandonedAfter age: Duration = .seconds(86_400)) async throws -> Int {
        let seconds = Double(age.components.seconds)
        return try await self.withConnection("prune stored shard tokens") { connection in
            let rows = try await connection.query(
                """
                WITH deleted AS (
                    DELETE FROM campaign_shard_tokens t
                    WHERE NOT EXISTS (
                        SELECT 1 FROM campaigns c
                        WHERE c.campaign_id = t.campaign_id AND (c.launch IS NULL OR c.launch = t.launch)
                          AND (NOT c.queue_removed OR c.kind = 'notification')
                    ) AND (
                        EXISTS (SELECT 1 FROM campaigns c WHERE c.campaign_id = t.campaign_id)
                        OR t.created_at < now() - make_interval(secs => \(seconds))
                    )
                    RETURNING 1
                )
                SELECT count(*) FROM deleted
                """,
                logger: self.logger
            )
            var deleted = 0
            for try await count in rows.decode(Int.self) { deleted = count }
            return deleted
        }
    }
}

/// Shards bound as one `bytea[]`, each element a shard's tokens packed: for each token a length
/// byte (1…255), then its bytes. Written straight into the bind buffer.
struct PackedShards: PostgresNonThrowingEncodable, PostgresDynamicTypeEncodable {
    let shards: [[DeviceToken]]

    init(_ shards: [[DeviceToken]]) { self.shards = shards }

    static var psqlType: PostgresDataType { .byteaArray }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        buffer.writeByteaArrayHeader(count: self.shards.count)
        for tokens in self.shards {
            let byteCount = tokens.reduce(0) { $0 + 1 + $1.count }
            buffer.writeInteger(Int32(byteCount))
            guard byteCount > 0 else { continue }
            buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: byteCount) { out in
                var at = out.baseAddress!
                for token in tokens {
                    at.storeBytes(of: UInt8(token.count), as: UInt8.self)
                    at += 1 + token.copyBytes(to: at + 1)
                }
                return byteCount
            }
        }
    }

    /// The tokens of one packed shard; nil when the bytes are not a packing.
    static func unpack(_ packed: ByteBuffer) -> [DeviceToken]? {
        var buffer = packed
        var tokens: [DeviceToken] = []
        while let count = buffer.readInteger(as: UInt8.self) {
            guard count > 0, let token = buffer.readWithUnsafeReadableBytes({ bytes -> (Int, DeviceToken?) in
                guard bytes.count >= Int(count) else { return (0, nil) }
                return (Int(count), try? DeviceToken(bytes: UnsafeRawBufferPointer(rebasing: bytes[..<Int(count)])))
            }) else { return nil }
            tokens.append(token)
        }
        return tokens
    }
}

/// Shards' recipient values bound as one `bytea[]`, each element a shard's ``RecipientValueList``
/// packing: for each recipient its packed values' length (unsigned LEB128), then the bytes.
struct PackedValues: PostgresNonThrowingEncodable, PostgresDynamicTypeEncodable {
    let shards: [RecipientValueList]

    init(_ shards: [RecipientValueList]) { self.shards = shards }

    static var psqlType: PostgresDataType { .byteaArray }
    static var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        buffer.writeByteaArrayHeader(count: self.shards.count)
        for recipients in self.shards {
            buffer.writeInteger(Int32(recipients.bytes.count))
            buffer.writeBytes(recipients.bytes)
        }
    }
}
