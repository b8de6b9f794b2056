import Foundation
public import PushFleetCore

/// The autoscaling signal: `pf:backlog:<topic>:<environment>`, a list whose length is the number of
/// unfinished shards of the running campaigns of that topic and environment. KEDA's Redis list
/// scaler (or anything that can run `LLEN`) scales workers on it without PushFleet code; the list's
/// elements mean nothing. The coordinator sets it every round; `pf:backlogs` names the lists it
/// set, so that one whose topic has no running campaign left is deleted, even by another leader.
extension CampaignQueue {
    /// Sets each backlog list of `shards` (topic and environment → unfinished shards) to its length,
    /// and deletes those set before that are not in `shards` (or are 0).
    public func setBacklogs(_ shards: [BacklogKey: Int]) async throws {
        let current = Set(shards.filter { $0.value > 0 }.keys.map(\.redisKey))
        try await self.client.withConnection { connection in
            let reply = try connection.checkedCommand([Array("SMEMBERS".utf8), Array(Self.backlogs.utf8)])
            let known = Set((reply.array ?? []).compactMap(\.string))
            // Unlisted before deleted: should another coordinator list and set the same list in
            // between, it is listed and gone for a round (and set again), never set and unlisted.
            for stale in known.subtracting(current) {
                _ = try connection.checkedCommand([Array("SREM".utf8), Array(Self.backlogs.utf8), Array(stale.utf8)])
                _ = try connection.checkedCommand([Array("DEL".utf8), Array(stale.utf8)])
            }
            for (key, count) in shards where count > 0 {
                _ = try connection.checkedCommand([Array("SADD".utf8), Array(Self.backlogs.utf8), Array(key.redisKey.utf8)])
                _ = try connection.checkedEvaluate(
                    "setBacklog", CampaignScripts.setListLength, keys: [Array(key.redisKey.utf8)], arguments: [count.redisArgument]
                )
            }
        }
    }

    /// The length of the backlog list of `topic` and `environment` (0 when there is none).
    public func backlog(topic: String, environment: APNsEnvironment) async throws -> Int {
        try await self.count("LLEN", Array(BacklogKey(topic: topic, environment: environment).redisKey.utf8))
    }

    /// SET of the backlog lists the coordinator keeps.
    static let backlogs = "pf:backlogs"
}

/// A topic and environment, as the backlog lists name them.
public struct BacklogKey: Hashable, Sendable {
    public var topic: String
    public var environment: APNsEnvironment

    public init(topic: String, environment: APNsEnvironment) {
        self.topic = topic
        self.environment = environment
    }

    /// LIST (no hash tag: single-key commands and a one-key script).
    public var redisKey: String { "pf:backlog:\(self.topic):\(self.environment.rawValue)" }
}
