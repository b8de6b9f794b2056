public import APNSTransport
public import Foundation
public import Logging
public import PushFleetRedis
import APNSWire
import PushFleetCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A stateless worker: claims shards of the campaigns of one topic and environment, sends them, and
/// records every outcome in Redis. It may be killed at any instant; another worker resumes its shards
/// from their last checkpoint when the lease runs out.
///
/// Each of ``Configuration/connections`` slots works one shard at a time over its own long-lived
/// ``BinarySender``. On ``DrainSignal`` the slots stop claiming, wait for the outcomes of what was
/// already sent, checkpoint, and release the unsent tail.
public final class WorkerService: Sendable {
    public let configuration: Configuration
    let queue: CampaignQueue
    let makeSender: @Sendable () -> BinarySender
    let logger: Logger

    /// - Parameter makeSender: makes a sender for a slot; called again after a slot lost a lease
    ///   (the old sender is shut down, dropping whatever it still held for that shard).
    public init(configuration: Configuration, queue: CampaignQueue, logger: Logger, makeSender: @escaping @Sendable () -> BinarySender) {
        self.configuration = configuration
        self.queue = queue
        self.makeSender = makeSender
        var logger = logger
        logger[metadataKey: "worker"] = "\(configuration.workerID)"
        self.logger = logger
    }

    /// Serves until `drain` is triggered, then drains and returns.
    public func run(until drain: DrainSignal) async {
        let payloads = PayloadCache()
        await withTaskGroup(of: Void.self) { group in
            for slot in 0..<self.configuration.connections {
                group.addTask { await self.runSlot(slot, drain: drain, payloads: payloads) }
            }
        }
        self.logger.info("worker drained")
    }

    private func runSlot(_ slot: Int, drain: DrainSignal, payloads: PayloadCache) async {
        let (inputs, continuation) = AsyncStream.makeStream(of: SlotInput.self)
        var iterator = inputs.makeAsyncIterator()
        let working = StopFlag()  // set while a shard runs: ticks are only for ShardRun
        let ticker = Task {
            while !Task.isCancelled {
                if working.isSet { continuation.yield(.tick) }
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { ticker.cancel() }
        var sender = self.makeSender()
        var forwarder = Self.forward(sender, to: continuation)
        var run = 0
        while !drain.isTriggered {
            let claimed: (ShardLease, CampaignDescriptor, Payload)?
            do {
                claimed = try await self.claimAny(payloads: payloads)
            } catch {
                self.logger.warning("cannot claim work", metadata: ["error": "\(error)"])
                await drain.sleep(for: .seconds(1))
                continue
            }
            guard let (lease, descriptor, payload) = claimed else {
                await drain.sleep(for: self.configuration.idlePoll)
                continue
            }
            run += 1
            var shard = ShardRun(
                worker: self, lease: lease, descriptor: descriptor, payload: payload, sender: sender,
                run: UInt64(slot & 0xFFFF) << 48 | UInt64(run & 0xFFFF) << 32, drain: drain
            )
            working.set()
            let ending = await shard.execute(inputs: &iterator, continuation: continuation)
            working.clear()
            switch ending {
            case .completed, .released:
                break
            case .leaseLost, .abandoned:
                // Stop sending that shard at once: the sender's queue and unconfirmed frames go.
                _ = await sender.shutdown()
                await forwarder.value
                sender = self.makeSender()
                forwarder = Self.forward(sender, to: continuation)
            }
        }
        _ = await sender.shutdown()
        await forwarder.value
    }

    /// Passes a sender's outcomes to the slot, until the sender is shut down.
    private static func forward(_ sender: BinarySender, to continuation: AsyncStream<SlotInput>.Continuation) -> Task<Void, Never> {
        Task {
            for await event in sender.events { continuation.yield(.outcome(event)) }
        }
    }

    /// Claims a shard of any active campaign of this topic and environment.
    private func claimAny(payloads: PayloadCache) async throws -> (ShardLease, CampaignDescriptor, Payload)? {
        let campaigns = try await self.queue.activeCampaigns(topic: self.configuration.topic, environment: self.configuration.environment)
        for campaign in campaigns.shuffled() {
            guard let (descriptor, payload) = try await payloads.get(campaign, queue: self.queue, logger: self.logger) else { continue }
            if let lease = try await self.queue.claim(
                campaign: campaign, worker: self.configuration.workerID, leaseMilliseconds: self.configuration.leaseMilliseconds
            ) {
                return (lease, descriptor, payload)
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

/// Campaign descriptors and their checked payloads, read from Redis once per campaign.
final class PayloadCache: Sendable {
    private let entries = Mutex<[UUID: (CampaignDescriptor, Payload)?]>([:])

    func get(_ campaign: UUID, queue: CampaignQueue, logger: Logger) async throws -> (CampaignDescriptor, Payload)? {
        if let cached = self.entries.withLock({ $0[campaign] }) { return cached }
        guard let descriptor = try await queue.descriptor(campaign: campaign) else { return nil }
        let entry: (CampaignDescriptor, Payload)?
        do {
            entry = (descriptor, try Payload(jsonText: descriptor.payload, format: .binaryFrame))
        } catch {
            logger.error("campaign cannot be sent over the binary protocol; leaving it to other workers", metadata: ["campaign": "\(campaign)", "error": "\(error)"])
            entry = nil
        }
        self.entries.withLock { $0[campaign] = entry }
        return entry
    }
}
