import APNSMockServer
import APNSTransport
import APNSWire
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetTestSupport
import Testing

/// A worker that stops a shard early (a drain, a pause) takes back what it queued and was never
/// written, so that it waits only for what is out. On both protocols: exactly the matching
/// notifications that were never written come back, in order; they get no outcome and never reach
/// the gateway; everything else is sent and answered as before.
@Suite struct SenderWithdrawTests {
    static let mask: UInt64 = 0xFFFF_FFFF_0000_0000
    static let runA: UInt64 = 1 << 32
    static let runB: UInt64 = 2 << 32
    static let runC: UInt64 = 3 << 32

    @Test func binaryTakesBackOnlyTheRunsUnwrittenNotifications() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let sender = BinarySender(configuration: try fixture.senderConfiguration(), eventLoop: MultiThreadedEventLoopGroup.singleton.next(), logger: quietLogger)
        let events = Task {
            var tags: [UInt64] = []
            for await outcomes in sender.events { tags += outcomes.map(\.tag) }
            return tags
        }
        let payload = try APSPayload(alert: .text("hi")).payload(for: .binaryFrame)
        func notifications(_ run: UInt64, seed: UInt64) -> [BinaryNotification] {
            (0..<200).map { BinaryNotification(token: TestTokens.token($0, seed: seed), payload: payload, tag: run | UInt64($0)) }
        }
        let (a, b, c) = (notifications(Self.runA, seed: 1), notifications(Self.runB, seed: 2), notifications(Self.runC, seed: 3))

        // Run A is written and proven; then writing stops and B and C wait in the queue.
        try await sender.send(a)
        await sender.flush()
        sender.setWriteDeadline(.now - .seconds(1))
        try await sender.send(b)
        try await sender.send(c)
        let withdrawn = await sender.withdraw { $0.tag & Self.mask == Self.runB }
        #expect(withdrawn.map(\.tag) == b.map(\.tag), "B's notifications, in order, and nothing else")
        #expect(await sender.withdraw { $0.tag & Self.mask == Self.runB }.isEmpty, "taken back once")

        sender.setWriteDeadline(nil)
        await sender.flush()
        #expect(await sender.statistics().withdrawn == b.count)
        #expect(await sender.shutdown().isEmpty)
        #expect(Set(await events.value) == Set((a + c).map(\.tag)), "an outcome for every notification not taken back, none for B")
        #expect(fixture.ledger.snapshot().accepted == a.count + c.count)
        #expect(b.allSatisfy { fixture.ledger.deliveries(of: $0.token) == 0 }, "a notification taken back reached the gateway")
    }

    @Test func http2TakesBackOnlyTheRunsUnwrittenNotifications() async throws {
        let gateway = try await HTTP2GatewayFixture.start()
        defer { Task { await gateway.stop() } }
        let (sender, outcomes) = try HTTP2SenderFixture.sender(try HTTP2SenderFixture.configuration(port: gateway.port, certificate: true))
        func notifications(_ run: UInt64, seed: UInt64) -> [HTTP2Notification] {
            (0..<200).map { HTTP2Notification(token: TestTokens.token($0, seed: seed), tag: run | UInt64($0), template: HTTP2SenderFixture.template) }
        }
        let (a, b, c) = (notifications(Self.runA, seed: 1), notifications(Self.runB, seed: 2), notifications(Self.runC, seed: 3))

        try await sender.send(a)
        await sender.flush()
        sender.setWriteDeadline(.now - .seconds(1))
        try await sender.send(b)
        try await sender.send(c)
        let withdrawn = await sender.withdraw { $0.tag & Self.mask == Self.runB }
        #expect(withdrawn.map(\.tag) == b.map(\.tag), "B's notifications, in order, and nothing else")

        sender.setWriteDeadline(nil)
        await sender.flush()
        let statistics = await sender.statistics()
        #expect(statistics.withdrawn == b.count)
        #expect(statistics.requestsWritten == a.count + c.count)
        #expect(await sender.shutdown().isEmpty)
        let answered = await outcomes.value
        #expect(Set(answered.accepted.map(\.tag)) == Set((a + c).map(\.tag)))
        #expect(answered.rejected.isEmpty)
        #expect(b.allSatisfy { gateway.ledger.deliveries(of: $0.token) == 0 }, "a notification taken back reached the gateway")
    }

    /// A notification written once and queued to be sent again (here after a 503) is not taken
    /// back: it sits below later notifications of its run that were written and answered, and a
    /// shard's cursor can only pass it once it has its own outcome.
    @Test func http2KeepsWhatWasWrittenBeforeAndWaitsToBeSentAgain() async throws {
        // The test must stop the sender's writes before the 503 arrives. A machine too busy for
        // that within the answer's delay proves nothing: tried again with the delay doubled.
        var reached = false
        for attempt in 0..<4 where !reached {
            reached = try await self.keepsWhatWasWrittenBefore(answerDelay: .seconds(Int64(2) << attempt))
        }
        #expect(reached, "the 503 came before writing stopped in every attempt; the case was not reached")
    }

    /// One attempt; false when the case was not reached.
    private func keepsWhatWasWrittenBefore(answerDelay: TimeAmount) async throws -> Bool {
        let first = TestTokens.token(0, seed: 9)
        let answersForFirst = ScriptCounter()
        let server = try await HTTP2ScriptedServer.start { request in
            guard request.token == first.hexString, answersForFirst.next(request.token) == 1 else { return [.respond(status: 200)] }
            return [.respond(status: 503, reason: "ServiceUnavailable", after: answerDelay)]
        }
        defer { Task { await server.stop() } }
        var configuration = try HTTP2SenderFixture.configuration(server, certificate: false)
        configuration.retryBackoff = Backoff(initial: 0, maximum: 0)  // queued again at once
        let (sender, outcomes) = try HTTP2SenderFixture.sender(configuration)

        let written = HTTP2Notification(token: first, tag: Self.runB, template: HTTP2SenderFixture.template)
        try await sender.send([written])
        while server.requests.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        sender.setWriteDeadline(.now - .seconds(1))
        while await sender.statistics().retries == 0 { try await Task.sleep(for: .milliseconds(10)) }
        guard await sender.statistics().requestsWritten == 1 else {
            sender.setWriteDeadline(nil)
            _ = await sender.shutdown()
            _ = await outcomes.value
            return false
        }

        let unwritten = (1..<50).map { HTTP2Notification(token: TestTokens.token($0, seed: 9), tag: Self.runB | UInt64($0), template: HTTP2SenderFixture.template) }
        try await sender.send(unwritten)
        let withdrawn = await sender.withdraw { $0.tag & Self.mask == Self.runB }
        #expect(withdrawn.map(\.tag) == unwritten.map(\.tag), "the queued retry stays; only what was never written comes back")

        sender.setWriteDeadline(nil)
        await sender.flush()
        #expect(await sender.shutdown().isEmpty)
        #expect(await outcomes.value.accepted.map(\.tag) == [Self.runB])
        #expect(server.requests.map(\.token) == [first.hexString, first.hexString])
        return true
    }
}
