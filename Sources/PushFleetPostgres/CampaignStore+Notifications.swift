public import Foundation
import PostgresNIO
import PushFleetCore

extension CampaignStore {
    /// The notification with this id and what became of it at each device; nil when there is no
    /// notification of that id (a campaign's id included).
    ///
    /// A device's outcome is its rejection when APNs refused it; otherwise it is accepted once its
    /// position in its shard is below the shard's folded cursor (or the notification completed),
    /// cancelled or failed when the notification ended so first, and pending until then.
    public func notificationReport(_ id: UUID) async throws -> NotificationReport? {
        guard let record = try await self.campaign(id), record.kind == .notification else { return nil }
        let operation = "read the outcomes of notification \(id)"
        let endpoint = self.configuration.endpoint
        return try await self.withConnection(operation) { connection -> NotificationReport? in
            var audience: String? = nil
            let head = try await connection.query("SELECT audience FROM campaigns WHERE campaign_id = \(id)", logger: self.logger)
            for try await value in head.decode(String?.self) { audience = value }

            var devices: [DeviceOutcome] = []
            let shards = try await connection.query(
                """
                SELECT t.shard, t.tokens, s.cursor
                FROM campaigns c
                JOIN campaign_shard_tokens t ON t.campaign_id = c.campaign_id AND t.launch = c.launch
                JOIN campaign_shards s ON s.campaign_id = c.campaign_id AND s.shard = t.shard
                WHERE c.campaign_id = \(id)
                ORDER BY t.shard
                """,
                logger: self.logger
            )
            for try await (shard, bytes, cursor) in shards.decode((Int, ByteBuffer, Int).self) {
                guard let tokens = PackedShards.unpack(bytes) else {
                    throw PostgresStoreError.queryFailed(
                        endpoint, operation, "the stored bytes of shard \(shard) (\(bytes.readableBytes)) are not packed tokens"
                    )
                }
                for (position, token) in tokens.enumerated() {
                    let status: DeviceOutcome.Status
                    switch record.state {
                    case _ where record.state == .completed || position < cursor: status = .accepted
                    case .cancelled: status = .cancelled
                    case .failed: status = .failed
                    default: status = .pending
                    }
                    devices.append(DeviceOutcome(token: token, user: nil, status: status))
                }
            }

            var index: [DeviceToken: Int] = [:]
            for (offset, device) in devices.enumerated() { index[device.token] = offset }
            let failures = try await connection.query(
                """
                SELECT DISTINCT ON (token) token, reason, apns_timestamp FROM token_failures
                WHERE campaign_id = \(id) ORDER BY token, batch, position
                """,
                logger: self.logger
            )
            for try await (bytes, reason, timestamp) in failures.decode((ByteBuffer, String, Int64?).self) {
                guard let offset = index[try DeviceToken(postgres: bytes)] else { continue }
                devices[offset].status = .rejected
                devices[offset].reason = reason
                devices[offset].apnsTimestampMilliseconds = timestamp
            }

            let owners = try await connection.query(
                """
                SELECT d.token, d.user_id FROM device_tokens d
                WHERE d.app_id = (SELECT app_id FROM apps WHERE topic = \(record.topic) AND environment = \(record.environment.rawValue))
                  AND d.token = ANY(\(devices.map(\.token.byteBuffer))) AND d.user_id IS NOT NULL
                """,
                logger: self.logger
            )
            for try await (bytes, user) in owners.decode((ByteBuffer, String).self) {
                if let offset = index[try DeviceToken(postgres: bytes)] { devices[offset].user = user }
            }
            return NotificationReport(record: record, audience: audience, devices: devices)
        }
    }
}

extension CampaignStore {
    /// Deletes notifications finished before `cutoff` with everything kept for them (shards,
    /// stored tokens, token failures), at most `limit` per call; returns how many. Campaigns are
    /// never deleted here.
    public func pruneNotifications(finishedBefore cutoff: Date, limit: Int = 10_000) async throws -> Int {
        try await self.withTransaction("prune notifications") { connection in
            let rows = try await connection.query(
                """
                WITH doomed AS (
                    SELECT campaign_id FROM campaigns
                    WHERE kind = 'notification' AND finished_at < \(cutoff) AND queue_removed
                    ORDER BY finished_at LIMIT \(limit)
                ), tokens AS (
                    DELETE FROM campaign_shard_tokens WHERE campaign_id IN (SELECT campaign_id FROM doomed)
                ), failures AS (
                    DELETE FROM token_failure_batches WHERE campaign_id IN (SELECT campaign_id FROM doomed)
                )
                DELETE FROM campaigns WHERE campaign_id IN (SELECT campaign_id FROM doomed) RETURNING 1
                """,
                logger: self.logger
            )
            var deleted = 0
            for try await _ in rows { deleted += 1 }
            return deleted
        }
    }
}
