import APNSMockServer
import Foundation
import PushFleetCore
@testable import PushFleetPostgres
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A 100,000-token campaign over HTTP/2: 1% `BadDeviceToken`, 1% `410 Unregistered`, every 100th
/// answer of the simulator a 503, and a `GOAWAY` after every 20,000 streams of a connection (four
/// connections share the 100,000 and their retries, so at least one reaches it).
/// In the pipeline suite, so its coordinator never leads while another pipeline test runs.
extension PipelineTests {
    @Test(arguments: [PipelineFixture.HTTP2Authentication.providerToken, .certificate])
    func http2CampaignCompletesExactlyThroughFaults(_ authentication: PipelineFixture.HTTP2Authentication) async throws {
        // 16 streams per connection instead of APNs' 1,000: chosen when the debug build spent
        // milliseconds per frame at 1,000 in the simulator of that time (NIOHTTP2Handler);
        // the behaviour under test does not depend on the number.
        let fixture = try await PipelineFixture.start(
            count: 100_000, http2Faults: .init(serviceUnavailableEvery: 100, goAwayAfter: 20_000), maxConcurrentStreams: 16
        )
        defer { Task { await fixture.stop() } }
        // The registry holds the stale tokens but one of each kind: those two are not registered
        // devices, so their verdicts stay with the campaign (token_failures) and out of the registry.
        let (strayInvalid, strayUnregistered) = (try #require(fixture.invalid.first), try #require(fixture.unregistered.first))
        try await fixture.registerStaleTokens(except: [strayInvalid, strayUnregistered])
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startHTTP2Worker(authentication) }
        let id = try await fixture.launch(protocol: "http2")
        let status = try await fixture.waitForCompletion(id, limit: .seconds(1_800))
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: true)

        // Every 503 the simulator answered was retried, and counted once.
        let snapshot = fixture.mock.ledger.snapshot()
        let unavailable = snapshot.rejected["ServiceUnavailable"] ?? 0
        #expect(unavailable > 0)
        #expect(status["retried"] as? Int == unavailable)
        #expect((snapshot.closes["goaway"] ?? 0) > 0, "the simulator never sent GOAWAY")

        // BadDeviceToken quarantines (a wrong environment looks the same); 410 marks the token
        // unregistered at APNs' timestamp.
        try await fixture.withStore { store in
            let status = { (token: DeviceToken) in try await store.tokenStatus(token, topic: fixture.topic, environment: .production) }
            var quarantined = 0
            for token in fixture.invalid where try await status(token) == .quarantined { quarantined += 1 }
            #expect(quarantined == fixture.invalid.count - 1)
            var unregistered = 0
            for token in fixture.unregistered where try await status(token) == .unregistered { unregistered += 1 }
            #expect(unregistered == fixture.unregistered.count - 1)
            #expect(try await status(strayInvalid) == nil)
            #expect(try await status(strayUnregistered) == nil)
            let recorded = try await store.tokenFailures(campaign: id, limit: fixture.tokens.count)
            #expect(recorded.count == fixture.invalid.count + fixture.unregistered.count, "every rejected token recorded")
            // Without a rebuilt queue nothing is settled twice, so no token has a second row.
            #expect(try await store.tokenFailureRowCount(campaign: id) == recorded.count, "a rejected token recorded twice")
            #expect(recorded.contains { $0.token == strayInvalid && $0.reason == .badDeviceToken })
            #expect(recorded.contains { $0.token == strayUnregistered && $0.reason == .unregistered && $0.apnsTimestampMilliseconds != nil })
        }
        for worker in workers { worker.signal(SIGTERM) }
        coordinator.signal(SIGTERM)
        for worker in workers { #expect(await worker.wait() == 0) }
        #expect(await coordinator.wait() == 0)
    }
}
