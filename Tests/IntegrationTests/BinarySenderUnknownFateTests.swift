import APNSMockServer
import APNSTransport
import APNSWire
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetTestSupport
import Testing

/// The binary sender against gateways that leave frames' fates unknown: one slower to answer than
/// the sender waits, one that drops every connection without a word, one that stops reading.
/// Each must end (no round sent forever), lose nothing, and count what may have gone twice.
@Suite struct BinarySenderUnknownFateTests {
    let payload = try! APSPayload(alert: .text("ding dong"), sound: "default").payload(for: .binaryFrame)

    struct Outcome {
        var accepted: [UInt64: Int] = [:]
        var refused: [UInt64: ProviderRefusal] = [:]
        var rejected: [UInt64: RejectionReason] = [:]
        var statistics = BinarySender.Statistics()
    }

    func run(_ count: Int, _ configuration: BinarySender.Configuration) async throws -> Outcome {
        let notifications = TestTokens.tokens(count, seed: UInt64.random(in: 1...UInt64.max)).enumerated().map {
            BinaryNotification(token: $1, payload: self.payload, tag: UInt64($0))
        }
        let sender = BinarySender(configuration: configuration, eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: quietLogger)
        let collector = sender.collectOutcomes()
        try await sender.send(notifications)
        await sender.flush()
        let statistics = await sender.statistics()
        #expect(await sender.shutdown().isEmpty)
        var outcome = Outcome(statistics: statistics)
        for event in await collector.value {
            switch event {
            case .accepted(let tag): outcome.accepted[tag, default: 0] += 1
            case .rejected(let tag, let rejection): outcome.rejected[tag] = rejection.reason
            case .refused(let tag, _, let refusal): outcome.refused[tag] = refusal
            }
        }
        return outcome
    }

    /// The gateway answers a sentinel after 1.2 s and the sender waits 0.8 s: the first round times
    /// out, and a later one, waiting twice as long each time (a loaded machine may answer later
    /// still), is proven. Before, every round timed out, for ever.
    @Test func aGatewaySlowerThanTheProofTimeoutIsStillProven() async throws {
        let fixture = try await BinaryFixture.start(errorDelay: .milliseconds(1_200))
        defer { Task { await fixture.stop() } }
        var configuration = try fixture.senderConfiguration(confirmEvery: 100)
        configuration.confirmationTimeout = .milliseconds(800)
        configuration.maximumAttempts = 10
        let outcome = try await self.run(50, configuration)

        #expect(outcome.accepted.count == 50 && outcome.accepted.values.allSatisfy { $0 == 1 })
        #expect(outcome.refused.isEmpty && outcome.rejected.isEmpty)
        #expect(outcome.statistics.confirmationTimeouts >= 1)
        let ledger = fixture.ledger.snapshot()
        #expect(ledger.distinctTokens == 50)
        #expect(ledger.duplicateDeliveries <= outcome.statistics.framesResentAfterSilentClose)
    }

    /// A gateway that drops every connection without an error response proves no round: each
    /// frame's fate is unknown every time, and once its attempts are used up it is refused as an
    /// outage (a campaign pauses until APNs heals), counted as possibly sent. Before, the sender
    /// wrote the same round again for ever.
    @Test func aGatewayThatDropsEveryConnectionIsAnOutage() async throws {
        let fixture = try await BinaryFixture.start(faults: .init(dropEvery: 1))
        defer { Task { await fixture.stop() } }
        var configuration = try fixture.senderConfiguration(confirmEvery: 100)
        configuration.maximumAttempts = 3
        let outcome = try await self.run(5, configuration)

        #expect(outcome.accepted.isEmpty && outcome.rejected.isEmpty)
        #expect(outcome.refused.count == 5)
        #expect(outcome.refused.values.allSatisfy { $0.reason == .connectionLost && $0.isOutage && $0.status == 0 })
        #expect(outcome.statistics.silentCloses >= 3)
        let ledger = fixture.ledger.snapshot()
        #expect(ledger.accepted <= outcome.statistics.framesResentAfterSilentClose)
    }
}
