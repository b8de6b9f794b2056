import APNSMockServer
import APNSTransport
import APNSWire
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetTestSupport
import Testing

/// A worker's fence by time: a sender past its write deadline writes nothing until it moves.
@Suite struct BinarySenderDeadlineTests {
    @Test func writesNothingPastTheDeadlineUntilItIsRenewed() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let sender = BinarySender(configuration: try fixture.senderConfiguration(), eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: quietLogger)
        let payload = try APSPayload(alert: .text("hi")).payload(for: .binaryFrame)
        sender.setWriteDeadline(.now - .seconds(1))
        try await sender.send((0..<300).map { BinaryNotification(token: TestTokens.token($0), payload: payload, tag: UInt64($0)) })

        // Long enough to connect and write many batches, had the deadline not held them back.
        try await Task.sleep(for: .milliseconds(500))
        #expect(fixture.ledger.snapshot().accepted == 0)
        #expect(await sender.statistics().framesWritten == 0)

        sender.setWriteDeadline(.now + .seconds(60))
        await sender.flush()
        #expect(fixture.ledger.snapshot().accepted == 300)
        #expect(await sender.shutdown().isEmpty)
    }
}
