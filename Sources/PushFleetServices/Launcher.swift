public import Foundation
public import PushFleetCore
public import PushFleetPostgres
public import PushFleetRedis
import Logging

/// Creates a campaign: reads and checks the whole audience, drops duplicates, stages the shards in
/// Redis as it goes (under keys of this launch alone), records the campaign in Postgres
/// (`pending`), publishes it to the workers in one atomic step, and marks it `running`.
///
/// Nothing becomes visible before every token was read and checked: a bad line discards what this
/// launch staged and leaves no campaign behind. Launches of one id, one after another or at once,
/// give one campaign: the first to record it in Postgres owns the id, the first to publish makes
/// it visible, and a launch that publishes nothing discards only its own staged keys. A launch
/// that dies after publishing leaves a campaign the coordinator adopts (published, still
/// `pending`); one that dies before is launched again by a re-run.
public struct Launcher: Sendable {
    /// What to send, and to whom.
    public struct Request: Sendable {
        public var id: UUID?
        /// What the campaign sends, and how: its payload checked already against its limit. A
        /// ``CampaignDefinition/personalized`` one takes each recipient's packed values from the
        /// token source (``TokenSource/batchValues``), and its shards keep them.
        public var definition: CampaignDefinition
        /// Tokens per shard. Defaults to 1,000.
        public var shardSize: Int
        /// Required token size in bytes (32 for the binary protocol), or `nil` for any.
        public var requiredTokenSize: Int?
        /// For a notification, whom it was asked for (`user:U`, `group:G`, `tokens`).
        public var audience: String? = nil
        /// When the campaign starts: it is `scheduled` until then, and the coordinator starts
        /// it. Nil, or a time already past, starts it at once.
        public var startsAt: Date? = nil
        /// The launch in parts this campaign is a part of (set by ``PartitionedLauncher``).
        public var split: SplitMembership? = nil
        /// Duplicates of this campaign's audience dropped before its tokens reached the launcher
        /// (by ``PartitionedLauncher``), counted with its own.
        public var duplicatesDroppedEarlier = 0

        public init(id: UUID? = nil, definition: CampaignDefinition, shardSize: Int = 1_000, requiredTokenSize: Int? = nil) {
            self.id = id
            self.definition = definition
            self.shardSize = shardSize
            self.requiredTokenSize = requiredTokenSize
        }
    }

    public struct Result: Sendable, Hashable {
        public var id: UUID
        public var total: Int
        public var duplicatesDropped: Int
        public var shardCount: Int
        /// `false` when a campaign with this id existed already and nothing was changed.
        public var created: Bool

        /// The result as JSON: the campaign's id, recipients, duplicates dropped, shards and
        /// whether it was created now, as `launch --json` prints it; `POST /v1/campaigns` adds
        /// where to follow the campaign (`href`).
        public func json(href: String? = nil) -> String { PushFleetJSON.encode(LaunchedJSON(result: self, href: href)) }
    }

    public let queue: CampaignQueue
    public let store: CampaignStore

    /// Shards written to Redis and Postgres per round trip while the audience is read.
    static let stagingBatch = 50

    /// Rate limits a campaign may have, notifications a second (Postgres keeps them as `integer`).
    public static let rateLimits = 1...100_000_000

    /// How far in the past a start time may be (clocks differ) and still mean "now".
    static let pastStartTolerance: TimeInterval = 60

    public init(queue: CampaignQueue, store: CampaignStore) {
        self.queue = queue
        self.store = store
    }

    /// A launch's name for what it staged: random, so that two launches of one id never share.
    static func newLaunchID() -> String { String(UInt64.random(in: 0...UInt64.max), radix: 36) }

    public func launch(_ request: Request, tokens: inout some TokenSource) async throws -> Result {
        if let rate = request.definition.rateLimit, !Self.rateLimits.contains(rate) { throw LaunchError.rateLimitOutOfRange(rate) }
        let launchedAt = Date()
        // The state it takes once published, and the status workers see.
        let target = CampaignState.published(startingAt: request.startsAt, now: launchedAt)
        let id = request.id ?? UUID()
        // An id made here is new: only a given one can name a campaign that exists.
        let existing = request.id == nil ? nil : try await self.store.campaign(id)
        // A launch run again after its start time finds its campaign; only a new one is refused.
        if existing == nil, let startsAt = request.startsAt, startsAt < launchedAt - Self.pastStartTolerance {
            throw LaunchError.startInThePast(startsAt, now: launchedAt)
        }
        let definition = request.definition
        if let existing, existing.kind != definition.kind || existing.topic != definition.topic || existing.environment != definition.environment {
            throw LaunchError.idInUse(id, by: existing)
        }
        let published = existing == nil ? false : try await self.queue.descriptor(campaign: id) != nil
        if let existing, existing.state != .pending || published {
            if existing.state == .pending {
                // Published by a launch that died before saying so: adopt it here (the coordinator would too).
                _ = try await self.store.setState(id, to: CampaignState.published(startingAt: existing.startsAt, now: Date()), from: [.pending])
            }
            return Result(id: id, total: existing.total, duplicatesDropped: existing.duplicatesDropped, shardCount: existing.shardCount, created: false)
        }
        // A pending campaign without its Redis half is one whose launch died before publishing:
        // stage it again and publish it.
        let launch = Self.newLaunchID()
        var seen = TokenFingerprintSet()
        var shardCounts: [Int] = []
        var current: [DeviceToken] = []
        var staged: [(shard: Int, tokens: [DeviceToken])] = []
        // A personalized campaign's: the values of `current`'s recipients, and of `staged`'s.
        var currentValues = RecipientValueList()
        var stagedValues: [RecipientValueList] = []
        var duplicates = request.duplicatesDroppedEarlier
        // One batch of shards is written to Redis (on the client's own thread) while the next is read.
        var writing: Task<Void, any Error>? = nil
        let (queue, store) = (self.queue, self.store)
        func stage(_ shards: [(shard: Int, tokens: [DeviceToken])], values: [RecipientValueList]?) async throws {
            try await writing?.value
            // Redis gets the queue, Postgres the durable copy a lost queue is rebuilt from, at once.
            writing = Task {
                async let durable: Void = store.storeShardTokens(campaign: id, launch: launch, shards: shards, values: values)
                try await queue.stageShards(campaign: id, launch: launch, shards: shards, values: values)
                try await durable
            }
        }
        let personalized = definition.personalized
        func discard(shardCount: Int) async {
            try? await queue.discardStaged(campaign: id, launch: launch, shardCount: shardCount)
            try? await store.discardShardTokens(campaign: id, launch: launch)
        }
        current.reserveCapacity(request.shardSize)
        // A new campaign whose shards all fit in one batch (a notification's always do) is written
        // to Postgres with its shards' tokens in one statement, while Redis stages them.
        var together = false
        do {
            while true {
                let batch = try await tokens.next(upTo: 4_096)
                if batch.isEmpty { break }
                let values = personalized ? tokens.batchValues : nil
                precondition(!personalized || values?.count == batch.count, "a personalized launch's source gives values for every token")
                // Values are copied to `currentValues` a run of recipients at a time: `runCount`
                // taken in a row, whose values start at `run`; `next` is where the next
                // recipient's values start. A duplicate or the shard's end ends a run.
                var (next, run, runCount) = (0, 0, 0)
                func copyRun(to end: Int) {
                    if let values, runCount > 0 { currentValues.append(runCount, from: values, bytes: run..<end) }
                    runCount = 0
                }
                for token in batch {
                    let start = next
                    if let values { next = values.values(at: start).next }
                    if let required = request.requiredTokenSize, token.count != required {
                        throw LaunchError.wrongTokenSize(token.count, required: required)
                    }
                    guard seen.insert(token) else {
                        duplicates += 1
                        copyRun(to: start)
                        run = next
                        continue
                    }
                    current.append(token)
                    runCount += 1
                    if current.count == request.shardSize {
                        copyRun(to: next)
                        run = next
                        staged.append((shardCounts.count, current))
                        if personalized { stagedValues.append(currentValues) }
                        shardCounts.append(current.count)
                        current.removeAll(keepingCapacity: true)
                        currentValues.removeAll(keepingCapacity: true)
                        if staged.count == Self.stagingBatch {
                            try await stage(staged, values: personalized ? stagedValues : nil)
                            staged.removeAll()
                            stagedValues.removeAll()
                        }
                    }
                }
                copyRun(to: next)
            }
            if !current.isEmpty {
                staged.append((shardCounts.count, current))
                if personalized { stagedValues.append(currentValues) }
                shardCounts.append(current.count)
            }
            guard !shardCounts.isEmpty else { throw LaunchError.emptyAudience() }
            // The one statement of a small launch stores tokens alone: a personalized one stages.
            together = existing == nil && writing == nil && !personalized
            if !together, !staged.isEmpty { try await stage(staged, values: personalized ? stagedValues : nil) }
            try await writing?.value
        } catch {
            _ = try? await writing?.value
            await discard(shardCount: shardCounts.count + 1)
            throw error
        }

        let total = shardCounts.reduce(0, +)
        var campaign = NewCampaign(
            id: id, definition: definition, shardSize: request.shardSize, shardTokenCounts: shardCounts, totalTokens: total,
            duplicatesDropped: duplicates
        )
        campaign.audience = request.audience
        campaign.startsAt = request.startsAt
        campaign.split = request.split
        let used: Bool
        do {
            if together {
                used = try await self.recordStagingAndPublish(campaign, status: CampaignQueueStatus(target), launch: launch, shards: staged)
            } else {
                used = try await self.recordAndPublish(campaign, existing: existing, status: CampaignQueueStatus(target), launch: launch)
            }
        } catch {
            await discard(shardCount: shardCounts.count)
            throw error
        }
        guard used else {
            // Another launch of the same id recorded or published it first, with its own shards;
            // that launch (or the coordinator) marks it running.
            await discard(shardCount: shardCounts.count)
            return Result(id: id, total: total, duplicatesDropped: duplicates, shardCount: shardCounts.count, created: false)
        }
        if !together { try await self.store.recordLaunch(id, launch: launch) }
        _ = try await self.store.setState(id, to: target, from: [.pending])
        return Result(id: id, total: total, duplicatesDropped: duplicates, shardCount: shardCounts.count, created: true)
    }

    /// Records the campaign in Postgres with its shards' tokens and the launch, in one statement,
    /// while Redis stages the same shards, and publishes them if the row is this launch's: the
    /// fewest round trips for a small launch such as a doorbell's ring.
    /// - Returns: whether this launch's shards became the campaign (see ``recordAndPublish(_:existing:status:launch:)``).
    private func recordStagingAndPublish(
        _ campaign: NewCampaign, status: CampaignQueueStatus, launch: String, shards: [(shard: Int, tokens: [DeviceToken])]
    ) async throws -> Bool {
        async let recorded = self.store.createCampaign(campaign, tokens: (launch, shards))
        // Both finish before either error is thrown: the caller's discard then finds what they wrote.
        var stagingError: (any Error)? = nil
        do {
            try await self.queue.stageShards(campaign: campaign.id, launch: launch, shards: shards)
        } catch {
            stagingError = error
        }
        let created = try await recorded
        if let stagingError {
            // Nothing was published: the row this launch wrote goes too (a re-run starts afresh).
            if created { try? await self.store.discardUnpublishedCampaign(campaign.id, launch: launch) }
            throw stagingError
        }
        guard created else { return false }
        return try await self.queue.publish(CampaignDescriptor(campaign, status: status), launch: launch)
    }

    /// Records the staged campaign in Postgres (unless a pending row of an earlier launch is there)
    /// and publishes this launch's staged shards.
    /// - Returns: whether this launch's shards became the campaign; false when another launch of
    ///   the same id recorded or published it first.
    /// - Throws: ``LaunchError`` when a pending row records another audience.
    private func recordAndPublish(
        _ campaign: NewCampaign, existing: CampaignRecord?, status: CampaignQueueStatus, launch: String
    ) async throws -> Bool {
        if let existing {
            guard existing.total == campaign.totalTokens, existing.shardCount == campaign.shardTokenCounts.count else {
                throw LaunchError.audienceDiffers(campaign.id, recorded: existing.total, read: campaign.totalTokens)
            }
        } else if try await !self.store.createCampaign(campaign) {
            return false
        }
        return try await self.queue.publish(CampaignDescriptor(campaign, status: status), launch: launch)
    }
}

/// The object of ``Launcher/Result/json(href:)``; without `href`, no such field.
private struct LaunchedJSON: Encodable {
    let result: Launcher.Result
    let href: String?

    enum CodingKeys: String, CodingKey {
        case id, total
        case duplicatesDropped = "duplicates_dropped"
        case shards, created, href
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.result.id.uuidString.lowercased(), forKey: .id)
        try container.encode(self.result.total, forKey: .total)
        try container.encode(self.result.duplicatesDropped, forKey: .duplicatesDropped)
        try container.encode(self.result.shardCount, forKey: .shards)
        try container.encode(self.result.created, forKey: .created)
        try container.encodeIfPresent(self.href, forKey: .href)
    }
}
