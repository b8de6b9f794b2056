import APNSMockServer
import APNSTransport
import APNSWire
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetTestSupport
import Testing

/// The sender measures its proof rounds against the simulator over real TLS and asks for as many
/// frames per round as the gateway's error delay calls for, never more than `confirmEvery`.
@Suite struct BinarySenderPacingTests {
    @Test func aLongErrorDelayAsksForFullRounds() async throws {
        // A one-second error delay: a round of 500 frames would have to be written in under a
        // second for the pacer to ask for less than the bound (2,000 frames, four seconds' writing
        // at that rate, is 4 × the pause).
        let fixture = try await BinaryFixture.start(errorDelay: .seconds(1))
        let tokens = TestTokens.tokens(1_000, seed: 0xBACE)
        let payload = try APSPayload(alert: .text("pacing")).payload(for: .binaryFrame)
        let sender = BinarySender(
            configuration: try fixture.senderConfiguration(confirmEvery: 2_000), eventLoop: MultiThreadedEventLoopGroup.singleton.next(),
            logger: quietLogger
        )
        let accepted = Task {
            var count = 0
            for await outcomes in sender.events { count += outcomes.count { if case .accepted = $0 { true } else { false } } }
            return count
        }
        #expect(sender.framesWanted == 100)  // one batch until a round has been measured

        // Round one writes 500 frames and waits for its proof; round two starts on a new
        // connection, which measures the pause.
        for round in 0..<2 {
            let notifications = tokens[(round * 500)..<((round + 1) * 500)].enumerated().map {
                BinaryNotification(token: $1, payload: payload, tag: UInt64(round * 500 + $0))
            }
            try await sender.send(notifications)
            await sender.flush()
        }
        #expect(sender.framesWanted == 2_000)

        let statistics = await sender.statistics()
        #expect(statistics.sentinels == 2)
        #expect(await sender.shutdown().isEmpty)
        #expect(await accepted.value == 1_000)
        #expect(fixture.ledger.snapshot().accepted == 1_000)
        await fixture.stop()
    }
}
