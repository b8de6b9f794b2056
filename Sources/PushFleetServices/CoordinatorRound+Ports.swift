public import Foundation
public import PushFleetCore
public import PushFleetPostgres
public import PushFleetRedis

/// What a ``CoordinatorRound`` reads and writes in Redis: ``CampaignQueue``, or an in-memory
/// queue in a unit test. Each requirement is documented where `CampaignQueue` implements it.
public protocol CoordinatorQueue: Sendable {
    func isPublished(campaign: UUID) async throws -> Bool
    func launchID(campaign: UUID) async throws -> String?
    func pauseRequest(campaign: UUID) async throws -> PauseRequest?
    func clearPauseRequest(campaign: UUID) async throws
    func setStatus(campaign: UUID, _ status: CampaignQueueStatus) async throws
    func setStatus(campaign: UUID, _ status: CampaignQueueStatus, rateLimit: Int?) async throws
    func ensureActive(campaign: UUID, topic: String, environment: APNsEnvironment, kind: CampaignKind) async throws
    func deadShards(campaign: UUID) async throws -> [Int]
    func remove(campaign: UUID, topic: String, environment: APNsEnvironment, kind: CampaignKind) async throws
    func leaseCount(campaign: UUID) async throws -> Int
    func reapExpiredLeases(campaign: UUID, maximumAttempts: Int) async throws -> Int
    func snapshot(campaign: UUID) async throws -> QueueSnapshot?
    func forget(campaign: UUID, shardCount: Int) async throws
    func events(campaign: UUID, after id: String, count: Int) async throws -> [(id: String, event: QueueEvent)]
    func markFolded(campaign: UUID, fold: Int) async throws
    func trimEvents(campaign: UUID, through id: String) async throws
    func setBacklogs(_ shards: [BacklogKey: Int]) async throws
}

/// What a ``CoordinatorRound`` reads and writes in Postgres: ``CampaignStore``, or an in-memory
/// store in a unit test. Each requirement is documented where `CampaignStore` implements it.
public protocol CoordinatorStore: Sendable {
    func campaigns(in states: [CampaignState]) async throws -> [CampaignRecord]
    func campaignsAwaitingCleanup() async throws -> [CampaignRecord]
    func setState(_ id: UUID, to state: CampaignState, from allowed: [CampaignState], reason: String?) async throws -> Bool
    func recordLaunch(_ id: UUID, launch: String) async throws
    func pauseForOutage(_ id: UUID, reason: String, delay: Duration, maximum: Duration) async throws -> Date?
    func resumeAfterOutage(_ id: UUID) async throws -> Bool
    func setDeadShards(_ id: UUID, _ shards: [Int], failWith reason: String?) async throws -> Bool
    func markQueueRemoved(_ id: UUID) async throws
    func setCancelled(_ id: UUID, count: Int) async throws
    func apply(_ update: ProgressUpdate) async throws -> Bool
}

extension CoordinatorStore {
    func setState(_ id: UUID, to state: CampaignState, from allowed: [CampaignState]) async throws -> Bool {
        try await self.setState(id, to: state, from: allowed, reason: nil)
    }
}

extension CampaignQueue: CoordinatorQueue {
    /// Whether the campaign's descriptor is in Redis: its launch published it.
    public func isPublished(campaign: UUID) async throws -> Bool {
        try await self.descriptor(campaign: campaign) != nil
    }
}

extension CampaignStore: CoordinatorStore {}
