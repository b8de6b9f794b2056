public import APNSTransport
import APNSWire
import CoreMetrics
import Foundation
public import Logging
public import PushFleetRedis
import PushFleetCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A stateless worker: claims shards of the campaigns of one topic and environment, sends them, and
/// records every outcome in Redis. It may be killed at any instant; another worker resumes its shards
/// from their last checkpoint when the lease runs out.
///
/// Each of ``Configuration/connections`` slots owns one channel (a long-lived connection) and works up
/// to ``Configuration/shardsPerConnection`` shards of one campaign over it at once: the next shard is
/// claimed as soon as the previous one is fully handed to the channel, so the channel never waits for
/// a shard's last answers (over the binary protocol, the proof of its last frames) before sending
/// more. A binary channel may ask for more shards (``DeliveryChannel/tokensWanted``), up to
/// ``maximumShardsPerSlot``. On ``DrainSignal`` the slots stop claiming, wait for the outcomes of what was already sent,
/// checkpoint, and release the unsent tail.
public final class WorkerService: Sendable {
    public let configuration: Configuration
    let queue: CampaignQueue
    let transport: DeliveryTransport
    let logger: Logger
    /// Runs ended whose work Postgres may not hold yet: counted if Redis loses their queue first.
    let endedRuns = EndedRuns()
    /// The campaigns this worker's slots hold and which of them are throttled (see ``PacedCampaigns``).
    let paced = PacedCampaigns()
    /// What each of this worker's shard runs is given.
    var shardRunEnvironment: ShardRunEnvironment {
        ShardRunEnvironment(queue: self.queue, configuration: self.configuration, logger: self.logger, endedRuns: self.endedRuns, paced: self.paced)
    }
    private let channelProblem = Mutex<String?>(nil)

    /// Why the last attempt to make a sender failed (credentials that cannot be loaded), or `nil`
    /// when it succeeded.
    public var senderProblem: String? { self.channelProblem.withLock { $0 } }

    public init(configuration: Configuration, queue: CampaignQueue, transport: DeliveryTransport, logger: Logger) {
        self.configuration = configuration
        self.queue = queue
        self.transport = transport
        var logger = logger
        logger[metadataKey: "worker"] = "\(configuration.workerID)"
        self.logger = logger
    }

    /// Serves until `drain` is triggered, then drains and returns what its senders counted.
    @discardableResult
    public func run(until drain: DrainSignal) async -> SenderTotals {
        let templates = TemplateCache()
        let slots = (self.configuration.connections + self.transport.connectionsPerChannel - 1) / self.transport.connectionsPerChannel
        let totals = await withTaskGroup(of: SenderTotals.self) { group in
            for slot in 0..<slots {
                group.addTask { await self.runSlot(slot, work: .campaigns, drain: drain, templates: templates) }
            }
            if self.configuration.servesNotifications {
                group.addTask { await self.runSlot(slots, work: .notifications, drain: drain, templates: TemplateCache()) }
            }
            group.addTask {
                await self.reportPresence(until: drain)
                return SenderTotals()
            }
            return await group.reduce(SenderTotals(), +)
        }
        self.logger.info("worker drained")
        return totals
    }

    /// Says in Redis that this worker is alive every 2 seconds (the dashboard counts them), and
    /// that it is gone once drained.
    private func reportPresence(until drain: DrainSignal) async {
        let (worker, topic, environment) = (self.configuration.workerID, self.configuration.topic, self.configuration.environment)
        while !drain.isTriggered {
            do {
                try await self.queue.reportAlive(worker: worker, topic: topic, environment: environment)
            } catch {
                self.logger.debug("cannot report this worker alive", metadata: ["error": "\(error)"])
            }
            await drain.sleep(for: .seconds(2))
        }
        try? await self.queue.reportGone(worker: worker, topic: topic, environment: environment)
    }

    /// The most shards a slot works at once, whatever its channel asks for.
    static let maximumShardsPerSlot = 256

    /// What a slot serves: shards of its topic's campaigns, one campaign at a time, or the
    /// notifications of its topic's lane, any number of them at once.
    private enum SlotWork: Sendable {
        case campaigns
        case notifications

        var kind: CampaignKind {
            switch self {
            case .campaigns: .campaign
            case .notifications: .notification
            }
        }
    }

    /// What the slot loop hears from its runs, and for the lane, from its waker.
    private enum RunEvent: Sendable {
        case feedEnded(runTag: UInt64)
        case ended(runTag: UInt64)
        /// A notification may have been published (this one, if named), or a second went by: look for one.
        case wake(UUID?)
    }

    private struct Claim: Sendable {
        var lease: ShardLease
        /// When the claim was sent: the lease is timed from here, never from when its answer came.
        var leasedAt: ContinuousClock.Instant
        var template: CampaignTemplate
    }

    /// Works shards over one channel, replaced when a shard is given up on, until drained; returns
    /// what its channels counted.
    ///
    /// The notification lane is the same loop with three differences: its channel is the
    /// transport's lane channel (kept open, so a ring never waits for a handshake); it claims from
    /// the lane's set, any notification, without keeping to one campaign; and when idle it waits
    /// for a publication's wake-up (or one second) instead of polling.
    private func runSlot(_ slot: Int, work: SlotWork, drain: DrainSignal, templates: TemplateCache) async -> SenderTotals {
        let (events, sink) = AsyncStream.makeStream(of: RunEvent.self)
        var pending = events.makeAsyncIterator()
        var totals = SenderTotals()
        guard var context = await self.makeSlotContext(work: work, drain: drain) else { return totals }
        var router = context.startRouting()
        let waker = work == .notifications ? self.startWaker(sink, drain: drain) : nil
        defer { waker?.cancel() }
        let shardLimit = switch work {
        case .campaigns: self.configuration.shardsPerConnection * self.transport.connectionsPerChannel
        case .notifications: self.configuration.notificationRuns
        }
        var active = 0
        // The unsettled tokens of the active runs, as claimed (total less cursor), by their runTag.
        var onHand: [UInt64: Int] = [:]
        var tokensOnHand = 0
        var feeding: UInt64? = nil
        // The campaign of the run being fed, and the campaign of each active run (see ``PacedCampaigns``).
        var feedingCampaign: UUID? = nil
        var runCampaigns: [UInt64: UUID] = [:]
        // A look for other work a second after one found none beside a throttled campaign (its
        // runs may send no event for long).
        var lookAgainScheduled = false
        var campaign: UUID? = nil
        // The lane's: the notification the last wake-up named, claimed first.
        var woken: UUID? = nil
        var resetting = false
        var runs = 0
        // Discarding: a slot lives as long as the worker and runs a task per shard, and a plain
        // task group keeps every finished child until its result is awaited (never, here), some
        // 10 KB per shard: a worker grew by 7 MB per million notifications.
        await withDiscardingTaskGroup { group in
            while true {
                if active == 0 {
                    campaign = nil
                    if resetting {
                        // A run lost its lease: the channel's queue and unanswered notifications
                        // go with it, and the slot starts over on a new connection.
                        await context.channel.shutdown()
                        await router.value
                        // Without a new channel the slot ends, and the old one is counted there.
                        guard let fresh = await self.makeSlotContext(work: work, drain: drain) else { return }
                        totals = totals + (await context.channel.totals())
                        context = fresh
                        router = context.startRouting()
                        resetting = false
                    }
                    if drain.isTriggered { break }
                }
                // A feeder its campaign's rate limit holds back leaves the channel idle: another
                // campaign's shard may be fed beside it.
                let feedingIsPaced = feedingCampaign.map(self.paced.isPaced) ?? false
                if !drain.isTriggered, !resetting, feeding == nil || feedingIsPaced,
                   active < shardLimit || (work == .campaigns && active < Self.maximumShardsPerSlot && tokensOnHand < context.channel.tokensWanted ?? 0)
                {
                    let claimed: Claim?
                    do {
                        if feedingIsPaced {
                            // Any other campaign, not this one (another feeder of it would only wait too).
                            claimed = try await self.claim(work.kind, campaign: nil, excluding: feedingCampaign, templates: templates)
                        } else if let held = campaign, self.paced.isPaced(held) {
                            // A throttled campaign keeps no slot to itself: pick again, others first
                            // (it too, if nothing else has work), unless another slot already paces
                            // it and nothing else has work.
                            claimed = self.paced.shouldYield(held) ? nil : try await self.claim(work.kind, campaign: nil, templates: templates)
                        } else if let named = woken.take() {
                            // Without listing the lane's set: a ring's latency is made of round trips.
                            let first = try await self.claim(work.kind, campaign: named, templates: templates)
                            claimed = first != nil ? first : try await self.claim(work.kind, campaign: nil, templates: templates)
                        } else {
                            claimed = try await self.claim(work.kind, campaign: campaign, templates: templates)
                        }
                    } catch {
                        self.logger.warning("cannot claim work", metadata: ["error": "\(error)"])
                        claimed = nil
                    }
                    if let claimed {
                        runs += 1
                        let runTag = UInt64(slot & 0xFFFF) << 48 | UInt64(runs & 0xFFFF) << 32
                        let (inputs, continuation) = AsyncStream.makeStream(of: SlotInput.self)
                        context.register(runTag, continuation)
                        if work == .campaigns {
                            let claimedCampaign = claimed.lease.campaign
                            if campaign == nil || campaign.map(self.paced.isPaced) == true { campaign = claimedCampaign }
                            if !runCampaigns.values.contains(claimedCampaign) { self.paced.hold(claimedCampaign) }
                            runCampaigns[runTag] = claimedCampaign
                            feedingCampaign = claimedCampaign
                        }
                        let tokens = max(0, claimed.lease.tokenCount - claimed.lease.cursor)
                        onHand[runTag] = tokens
                        tokensOnHand += tokens
                        active += 1
                        feeding = runTag
                        group.addTask { [context] in
                            var shard = ShardRun(
                                environment: self.shardRunEnvironment, lease: claimed.lease, leasedAt: claimed.leasedAt, template: claimed.template, slot: context,
                                runTag: runTag, drain: drain, onFeedEnded: { sink.yield(.feedEnded(runTag: runTag)) }
                            )
                            let ending = await shard.execute(inputs: inputs, continuation: continuation)
                            FleetMetrics.shared.ended(ending)
                            // A shard given up on stops the channel before its deadline is lifted.
                            if ending == .leaseLost || ending == .abandoned { context.halt() }
                            context.unregister(runTag)
                            sink.yield(.ended(runTag: runTag))
                        }
                        continue
                    }
                    if active == 0 && work == .campaigns {
                        await drain.sleep(for: self.configuration.idlePoll)
                        continue
                    }
                    if work == .campaigns, !lookAgainScheduled, feedingIsPaced || campaign.map(self.paced.isPaced) == true {
                        lookAgainScheduled = true
                        group.addTask {
                            await drain.sleep(for: .seconds(1))
                            sink.yield(.wake(nil))
                        }
                    }
                }
                guard let event = await pending.next() else { break }
                switch event {
                case .wake(let notification):
                    lookAgainScheduled = false
                    if let notification { woken = notification }
                    continue
                case .feedEnded(let runTag):
                    if feeding == runTag { (feeding, feedingCampaign) = (nil, nil) }
                case .ended(let runTag):
                    active -= 1
                    tokensOnHand -= onHand.removeValue(forKey: runTag) ?? 0
                    if feeding == runTag { (feeding, feedingCampaign) = (nil, nil) }
                    if let ended = runCampaigns.removeValue(forKey: runTag), !runCampaigns.values.contains(ended) { self.paced.release(ended) }
                    if context.isHalted && !resetting {
                        // A shard was given up on (its task halted the channel before its deadline
                        // was lifted): the slot's other shards are released.
                        resetting = true
                        context.broadcast(.channelReset)
                    }
                }
            }
        }
        for held in Set(runCampaigns.values) { self.paced.release(held) }
        totals = totals + (await context.channel.totals())
        await context.channel.shutdown()
        await router.value
        return totals
    }

    /// A new channel for a slot; retried every second while its credentials cannot be loaded, nil
    /// once draining.
    private func makeSlotContext(work: SlotWork, drain: DrainSignal) async -> SlotContext? {
        while !drain.isTriggered {
            do {
                let channel = work == .campaigns ? try self.transport.makeChannel() : try self.transport.makeLaneChannel()
                let context = SlotContext(channel: channel)
                self.channelProblem.withLock { $0 = nil }
                return context
            } catch {
                self.channelProblem.withLock { $0 = "cannot make a \(self.transport.protocol.name) sender: \(error)" }
                self.logger.error("cannot make a \(self.transport.protocol.name) sender", metadata: ["error": "\(error)"])
                await drain.sleep(for: .seconds(1))
            }
        }
        return nil
    }

    /// Wakes the lane's loop whenever a notification of this topic is published, and at least
    /// once a second (a wake-up another worker took, a notification whose holder died, a drain).
    /// Waits in `BLPOP` on a Redis connection of its own.
    private func startWaker(_ sink: AsyncStream<RunEvent>.Continuation, drain: DrainSignal) -> Task<Void, Never> {
        let client = RedisClient(configuration: self.queue.client.configuration, logger: self.logger)
        let lane = CampaignQueue(client: client)
        let (topic, environment) = (self.configuration.topic, self.configuration.environment)
        let logger = self.logger
        return Task {
            while !drain.isTriggered && !Task.isCancelled {
                var published: UUID? = nil
                do {
                    let wake = try await lane.waitForNotification(topic: topic, environment: environment, timeout: .seconds(1))
                    if case .published(let id) = wake { published = id }
                } catch {
                    logger.warning("cannot wait for notifications; looking every second", metadata: ["error": "\(error)"])
                    await drain.sleep(for: .seconds(1))
                }
                sink.yield(.wake(published))
            }
            try? await client.shutdown()
        }
    }

    /// Claims a shard of `campaign`, or of any active campaign (or notification) of this topic and
    /// environment when nil.
    private func claim(_ kind: CampaignKind, campaign: UUID?, excluding: UUID? = nil, templates: TemplateCache) async throws -> Claim? {
        await self.endedRuns.reportDue(to: self.queue, logger: self.logger)
        let candidates: [UUID]
        if let campaign {
            candidates = [campaign]
        } else {
            let active = try await self.queue.activeCampaigns(
                topic: self.configuration.topic, environment: self.configuration.environment, kind: kind
            )
            templates.keepOnly(active)
            candidates = self.paced.preferringUnpaced(active.shuffled()).filter { $0 != excluding }
        }
        for candidate in candidates {
            let asked = ContinuousClock.now
            let template: CampaignTemplate?
            let lease: ShardLease?
            if let known = templates.entry(candidate) {
                guard let known else { continue }
                template = known
                lease = try await self.queue.claim(
                    campaign: candidate, worker: self.configuration.workerID, leaseMilliseconds: self.configuration.leaseMilliseconds
                )
            } else {
                // First sight of it (of every notification): its descriptor comes with the claim.
                let (descriptor, claimed) = try await self.queue.claimReadingDescriptor(
                    campaign: candidate, worker: self.configuration.workerID, leaseMilliseconds: self.configuration.leaseMilliseconds
                )
                template = descriptor.flatMap { templates.prepare(candidate, $0, transport: self.transport, logger: self.logger) }
                if template == nil, let claimed {
                    // A campaign this worker cannot send goes back to the others at once, nothing sent.
                    _ = try await self.queue.release(claimed, cursor: claimed.cursor, countAttempt: false)
                    continue
                }
                lease = claimed
            }
            if let lease, let template {
                FleetMetrics.shared.shardsClaimed.increment()
                return Claim(lease: lease, leasedAt: asked, template: template)
            }
        }
        return nil
    }

    /// `host-pid-xxxx`.
    public static func defaultWorkerID() -> String {
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, name.count)
        let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return "\(host)-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
    }
}

/// Campaign templates, read from Redis and prepared once per campaign. Bounded by the active
/// campaigns: each listing of them drops the others.
final class TemplateCache: Sendable {
    private let entries = Mutex<[UUID: CampaignTemplate?]>([:])

    /// Drops every entry but those of `campaigns` (the active ones).
    func keepOnly(_ campaigns: [UUID]) {
        let keep = Set(campaigns)
        self.entries.withLock { entries in entries = entries.filter { keep.contains($0.key) } }
    }

    /// The template of `campaign` if it was prepared (nil inside when it cannot be sent over this
    /// transport), or nil if it was not.
    func entry(_ campaign: UUID) -> CampaignTemplate?? {
        self.entries.withLock { $0[campaign] }
    }

    /// Prepares and keeps the template of `campaign`; nil (kept too) when this transport cannot send it.
    func prepare(_ campaign: UUID, _ descriptor: CampaignDescriptor, transport: DeliveryTransport, logger: Logger) -> CampaignTemplate? {
        let entry: CampaignTemplate?
        do {
            entry = try transport.makeTemplate(descriptor)
        } catch {
            logger.error(
                "campaign cannot be sent over the \(transport.protocol.name) protocol; leaving it to other workers",
                metadata: ["campaign": "\(campaign)", "error": "\(error)"]
            )
            entry = nil
        }
        self.entries.withLock { $0[campaign] = entry }
        return entry
    }
}
