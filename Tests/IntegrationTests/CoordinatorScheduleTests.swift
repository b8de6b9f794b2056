import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
@testable import PushFleetServices
import PushFleetTestSupport
import Synchronization
import Testing

/// Scheduled campaigns (`launch --at`) with `CoordinatorService.round()` in-process on an injected
/// clock: a campaign stays `scheduled`, and its shards unclaimable, until its time; then the next
/// round starts it and it completes as any other. No wall-clock time is waited for or asserted.
extension PipelineTests {
    @Suite struct CoordinatorScheduleTests {
        final class Clock: Sendable {
            let date: Mutex<Date>
            init(_ date: Date) { self.date = Mutex(date) }
            func set(_ date: Date) { self.date.withLock { $0 = date } }
            var now: Date { self.date.withLock { $0 } }
        }

        @Test func aScheduledCampaignWaitsForItsTimeThenRuns() async throws {
            let startsAt = Date().addingTimeInterval(3_600).rounded()
            let clock = Clock(Date())
            try await CoordinatorHarness.run(configuration: .init(clock: { clock.now })) { h in
                let c = try await h.launch(tokens: 6, startsAt: startsAt)
                var record = try #require(try await h.store.campaign(c))
                #expect(record.state == .scheduled)
                #expect(record.startsAt == startsAt)
                #expect(record.startedAt == nil)
                #expect(try await h.queue.descriptor(campaign: c)?.status == .scheduled)
                #expect(try await h.queue.claim(campaign: c, worker: "early", leaseMilliseconds: 30_000) == nil, "nothing to claim before its time")

                // A second before: rounds leave it waiting, and tell Redis so should it have heard otherwise.
                try await h.queue.setStatus(campaign: c, .running)
                clock.set(startsAt.addingTimeInterval(-1))
                try await h.coordinator.round()
                record = try #require(try await h.store.campaign(c))
                #expect(record.state == .scheduled)
                #expect(try await h.queue.descriptor(campaign: c)?.status == .scheduled)
                #expect(try await h.queue.claim(campaign: c, worker: "early", leaseMilliseconds: 30_000) == nil)

                // Its time: the round starts it, and it runs to completion.
                clock.set(startsAt)
                try await h.coordinator.round()
                record = try #require(try await h.store.campaign(c))
                #expect(record.state == .running)
                #expect(record.startedAt != nil)
                #expect(try await h.queue.descriptor(campaign: c)?.status == .running)
                let done = try await h.finishEveryShardAndFold(of: c)
                #expect(done.state == .completed)
                #expect(done.accepted == 6)
            }
        }

        @Test func aScheduledCampaignCanBeCancelledBeforeItStarts() async throws {
            let startsAt = Date().addingTimeInterval(3_600)
            let clock = Clock(Date())
            try await CoordinatorHarness.run(configuration: .init(clock: { clock.now })) { h in
                let c = try await h.launch(tokens: 4, startsAt: startsAt)
                #expect(try await h.store.setState(c, to: .cancelled, from: [.scheduled]))
                try await h.queue.setStatus(campaign: c, .cancelled)
                clock.set(startsAt.addingTimeInterval(60))
                try await h.coordinator.round()
                let record = try #require(try await h.store.campaign(c))
                #expect(record.state == .cancelled)
                #expect(record.cancelled == 4)
                #expect(record.startedAt == nil)
            }
        }

        /// A launch that died between publishing a scheduled campaign and recording it left it
        /// `pending`: the coordinator adopts it as scheduled, not running.
        @Test func anAdoptedScheduledCampaignStaysScheduled() async throws {
            let startsAt = Date().addingTimeInterval(3_600)
            let clock = Clock(Date())
            try await CoordinatorHarness.run(configuration: .init(clock: { clock.now })) { h in
                let c = try await h.launch(tokens: 2, startsAt: startsAt)
                // As if the launch had died before its last step.
                _ = try await h.store.setState(c, to: .pending, from: [.scheduled])
                try await h.coordinator.round()
                #expect(try await h.store.campaign(c)?.state == .scheduled)
                #expect(try await h.queue.descriptor(campaign: c)?.status == .scheduled)
                #expect(try await h.store.setState(c, to: .cancelled, from: [.scheduled]))
            }
        }

        /// Launching a scheduled campaign again after its time finds it and changes nothing (the
        /// past-time refusal is for new campaigns only).
        @Test func aScheduledLaunchRunAgainAfterItsTimeFindsItsCampaign() async throws {
            try await CoordinatorHarness.run { h in
                let payload = try Payload(jsonText: Array(#"{"aps":{"alert":"hi"}}"#.utf8), format: .http2)
                var request = Launcher.Request(
                    id: UUID(), definition: CampaignDefinition(topic: h.topic, environment: h.environment, payload: payload.bytes), shardSize: 2
                )
                request.startsAt = Date().addingTimeInterval(3_600)
                let tokens = TestTokens.tokens(4, seed: UInt64.random(in: 1...UInt64.max))
                var first = ArrayTokenSource(tokens)
                #expect(try await Launcher(queue: h.queue, store: h.store).launch(request, tokens: &first).created)
                request.startsAt = Date().addingTimeInterval(-7_200)  // as if run again hours later with the same arguments
                var again = ArrayTokenSource(tokens)
                let result = try await Launcher(queue: h.queue, store: h.store).launch(request, tokens: &again)
                #expect(!result.created)
                #expect(try await h.store.setState(result.id, to: .cancelled, from: [.scheduled]))
            }
        }

        @Test func aStartTimeLongPastIsRefusedAndNothingIsCreated() async throws {
            try await CoordinatorHarness.run { h in
                let past = Date().addingTimeInterval(-3_600)
                await #expect(throws: LaunchError.self) { _ = try await h.launch(tokens: 2, startsAt: past) }
                let campaigns = try await h.store.campaigns(in: CampaignState.allCases)
                #expect(campaigns.allSatisfy { $0.topic != h.topic })
            }
        }
    }
}

extension Date {
    /// Whole seconds: what an ISO 8601 time without fractions says.
    fileprivate func rounded() -> Date { Date(timeIntervalSince1970: self.timeIntervalSince1970.rounded(.down)) }
}
