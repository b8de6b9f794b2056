public import Foundation
public import PushFleetRedis
import Logging

/// What a shard run reads and writes in Redis: ``CampaignQueue``, or an in-memory queue in a unit
/// test. Each requirement is documented where `CampaignQueue` implements it.
public protocol ShardQueue: Sendable {
    func read(_ lease: ShardLease, from index: Int, count: Int, clock: Int?, personalized: Bool) async throws -> ShardWindow?
    func checkpoint(_ lease: ShardLease, _ delta: CheckpointDelta, leaseMilliseconds: Int) async throws -> CheckpointResult
    func complete(_ lease: ShardLease) async throws -> Bool
    func release(_ lease: ShardLease, cursor: Int, delivered: [Int], countAttempt: Bool) async throws -> Bool
    func requestPause(campaign: UUID, reason: String, outage: Bool) async throws -> Bool
}

extension CampaignQueue: ShardQueue {}

/// What a ``ShardRun`` needs of its worker besides the slot: the queue, the configuration, and
/// where it reports an ended run and a paced campaign.
struct ShardRunEnvironment: Sendable {
    let queue: any ShardQueue
    let configuration: WorkerService.Configuration
    let logger: Logger
    let endedRuns: EndedRuns
    let paced: PacedCampaigns
}
