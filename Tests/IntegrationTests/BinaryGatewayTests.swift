import APNSMockServer
import APNSTransport
import APNSWire
import NIOCore
import NIOSSL
import PushFleetCore
import PushFleetTestSupport
import Testing

/// The simulator's binary gateway over real TLS on loopback, byte by byte.
@Suite struct BinaryGatewayTests {
    let payload = try! APSPayload(alert: .text("Ding dong")).payload(for: .binaryFrame)

    private func exchange(_ fixture: BinaryFixture, _ frames: FrameBuilder) async throws -> [UInt8] {
        let reply = try await RawTLSClient.exchange(port: fixture.binaryPort, tls: try fixture.clientTLS(), bytes: frames.buffer)
        return Array(reply.readableBytesView)
    }

    @Test func acceptsSilentlyThenAnswersTheFirstBadFrameAndDiscardsTheRest() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        frames.command2(1, token: TestTokens.token(1), payload: self.payload)
        frames.command2(2, token: TestTokens.token(2), payload: self.payload)
        frames.command2(items: [(1, Array(repeating: 0xAB, count: 31)), (2, self.payload.bytes), (3, UInt32(3).bigEndianBytes)])
        frames.command2(4, token: TestTokens.token(4), payload: self.payload)
        let reply = try await self.exchange(fixture, frames)
        #expect(reply == [8, 5, 0, 0, 0, 3])  // command 8, InvalidTokenSize, identifier 3
        let snapshot = fixture.ledger.snapshot()
        #expect(snapshot.accepted == 2)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(1)) == 1)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(4)) == 0)  // after the bad frame: discarded
        #expect(snapshot.rejected == ["InvalidTokenSize": 1])
    }

    @Test(arguments: [
        // (description, items, expected status)
        ("no token item", [(UInt8(2), [UInt8]("{\"aps\":{}}".utf8)), (3, UInt32(9).bigEndianBytes)], UInt8(2)),
        ("empty token", [(1, []), (2, [UInt8]("{\"aps\":{}}".utf8)), (3, UInt32(9).bigEndianBytes)], 2),
        ("33-byte token", [(1, [UInt8](repeating: 1, count: 33)), (2, [UInt8]("{\"aps\":{}}".utf8)), (3, UInt32(9).bigEndianBytes)], 5),
        ("no payload item", [(1, [UInt8](repeating: 1, count: 32)), (3, UInt32(9).bigEndianBytes)], 4),
        ("empty payload", [(1, [UInt8](repeating: 1, count: 32)), (2, []), (3, UInt32(9).bigEndianBytes)], 4),
        ("2049-byte payload", [(1, [UInt8](repeating: 1, count: 32)), (2, [UInt8](repeating: 0x20, count: 2049)), (3, UInt32(9).bigEndianBytes)], 7),
        ("payload not JSON", [(1, [UInt8](repeating: 1, count: 32)), (2, [UInt8]("{aps:1}".utf8)), (3, UInt32(9).bigEndianBytes)], 1),
        ("payload not an object", [(1, [UInt8](repeating: 1, count: 32)), (2, [UInt8]("[1]".utf8)), (3, UInt32(9).bigEndianBytes)], 1),
        ("priority 7", [(1, [UInt8](repeating: 1, count: 32)), (2, [UInt8]("{\"aps\":{}}".utf8)), (3, UInt32(9).bigEndianBytes), (5, [7])], 1),
        ("priority 10, content-available only", [(1, [UInt8](repeating: 1, count: 32)), (2, [UInt8]("{\"aps\":{\"content-available\":1}}".utf8)), (3, UInt32(9).bigEndianBytes), (5, [10])], 1),
        ("unknown item 9", [(1, [UInt8](repeating: 1, count: 32)), (3, UInt32(9).bigEndianBytes), (9, [1])], 128),
    ] as [(String, [(UInt8, [UInt8])], UInt8)])
    func rejectsWithAPNsStatus(_ description: String, items: [(UInt8, [UInt8])], status: UInt8) async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        frames.command2(items: items)
        let reply = try await self.exchange(fixture, frames)
        #expect(reply == [8, status, 0, 0, 0, 9], "\(description)")
        #expect(fixture.ledger.snapshot().accepted == 0)
    }

    @Test func priorityFiveWithContentAvailableOnlyIsAccepted() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let background = try Payload(jsonText: Array("{\"aps\":{\"content-available\":1}}".utf8), format: .binaryFrame)
        var frames = FrameBuilder()
        frames.command2(1, token: TestTokens.token(1), payload: background, priority: 5)
        frames.command2(items: [(3, UInt32(2).bigEndianBytes)])  // no token: ends the exchange
        #expect(try await self.exchange(fixture, frames) == [8, 2, 0, 0, 0, 2])
        #expect(fixture.ledger.deliveries(of: TestTokens.token(1)) == 1)
    }

    @Test func listedInvalidTokenGetsStatus8() async throws {
        let fixture = try await BinaryFixture.start(invalidTokens: [TestTokens.token(7)])
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        frames.command2(6, token: TestTokens.token(6), payload: self.payload)
        frames.command2(7, token: TestTokens.token(7), payload: self.payload)
        #expect(try await self.exchange(fixture, frames) == [8, 8, 0, 0, 0, 7])
        #expect(fixture.ledger.snapshot().rejected == ["InvalidToken": 1])
        #expect(fixture.ledger.deliveries(of: TestTokens.token(6)) == 1)
    }

    @Test func command1PayloadLimitIs256Bytes() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let fits = "{\"aps\":{\"alert\":\"" + String(repeating: "x", count: 256 - 20) + "\"}}"
        let over = "{\"aps\":{\"alert\":\"" + String(repeating: "x", count: 257 - 20) + "\"}}"
        #expect(fits.utf8.count == 256 && over.utf8.count == 257)
        var frames = FrameBuilder()
        frames.command1(1, token: TestTokens.token(1), payload: Array(fits.utf8))
        frames.command1(2, token: TestTokens.token(2), payload: Array(over.utf8))
        #expect(try await self.exchange(fixture, frames) == [8, 7, 0, 0, 0, 2])
        #expect(fixture.ledger.deliveries(of: TestTokens.token(1)) == 1)
    }

    @Test func command0ErrorClosesWithoutAnswer() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        frames.command0(token: TestTokens.token(1), payload: self.payload.bytes)
        frames.command0(token: try DeviceToken(bytes: [1, 2, 3]), payload: self.payload.bytes)
        #expect(try await self.exchange(fixture, frames) == [])
        #expect(fixture.ledger.snapshot().accepted == 1)
        #expect(fixture.ledger.snapshot().rejected == ["InvalidTokenSize": 1])
    }

    @Test func unknownCommandIsAProtocolError() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        frames.buffer.writeBytes([9, 0, 0, 0, 0, 0, 0])
        #expect(try await self.exchange(fixture, frames) == [8, 128, 0, 0, 0, 0])
    }

    @Test func shutdownFaultNamesTheLastAcceptedNotification() async throws {
        let fixture = try await BinaryFixture.start(faults: .init(shutdownEvery: 3))
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        for id in 1...5 { frames.command2(UInt32(id), token: TestTokens.token(id), payload: self.payload) }
        #expect(try await self.exchange(fixture, frames) == [8, 10, 0, 0, 0, 3])
        #expect(fixture.ledger.snapshot().accepted == 3)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(4)) == 0)
    }

    @Test func dropFaultClosesSilentlyAndLosesTheRest() async throws {
        let fixture = try await BinaryFixture.start(faults: .init(dropEvery: 2))
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        for id in 1...5 { frames.command2(UInt32(id), token: TestTokens.token(id), payload: self.payload) }
        #expect(try await self.exchange(fixture, frames) == [])
        #expect(fixture.ledger.snapshot().accepted == 2)
        #expect(fixture.ledger.snapshot().closes["drop"] == 1)
    }

    @Test func feedbackServiceReportsUnregisteredTokensOnceThenClears() async throws {
        let gone = TestTokens.token(42)
        let fixture = try await BinaryFixture.start(unregisteredTokens: [gone])
        defer { Task { await fixture.stop() } }
        var frames = FrameBuilder()
        frames.command2(1, token: gone, payload: self.payload)
        frames.command2(2, token: TestTokens.token(43), payload: self.payload)
        frames.command2(items: [(3, UInt32(3).bigEndianBytes)])
        #expect(try await self.exchange(fixture, frames) == [8, 2, 0, 0, 0, 3])
        #expect(fixture.ledger.deliveries(of: gone) == 1)  // accepted by the gateway, as APNs did

        var first = try await RawTLSClient.exchange(port: fixture.ports.feedback!, tls: try fixture.clientTLS(), bytes: ByteBuffer())
        var decoder = FeedbackTupleDecoder()
        let tuple = try #require(try decoder.decode(buffer: &first))
        #expect(tuple.token == gone)
        #expect(tuple.timestamp > 1_700_000_000)
        #expect(first.readableBytes == 0)

        let second = try await RawTLSClient.exchange(port: fixture.ports.feedback!, tls: try fixture.clientTLS(), bytes: ByteBuffer())
        #expect(second.readableBytes == 0)
    }

    @Test func refusesAClientWithoutACertificate() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let anonymous = try ClientTLS.noClientCertificate(trusting: [fixture.certificates.caCertificate]).makeConfiguration()
        var frames = FrameBuilder()
        frames.command2(1, token: TestTokens.token(1), payload: self.payload)
        await #expect(throws: (any Error).self) {
            _ = try await RawTLSClient.exchange(port: fixture.binaryPort, tls: anonymous, bytes: frames.buffer)
        }
        #expect(fixture.ledger.snapshot().accepted == 0)
    }

    @Test func refusesAClientCertificateFromAnotherCA() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let rogue = try ClientTLS.certificate(
            pem: fixture.certificates.rogueClientCertificate,
            key: fixture.certificates.rogueClientKey,
            trusting: [fixture.certificates.caCertificate]
        ).makeConfiguration()
        var frames = FrameBuilder()
        frames.command2(1, token: TestTokens.token(1), payload: self.payload)
        await #expect(throws: (any Error).self) {
            _ = try await RawTLSClient.exchange(port: fixture.binaryPort, tls: rogue, bytes: frames.buffer)
        }
        #expect(fixture.ledger.snapshot().accepted == 0)
    }

    @Test func acceptsThePKCS12ClientIdentity() async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let tls = try ClientTLS.pkcs12(
            path: fixture.certificates.clientPKCS12,
            password: Array(try fixture.certificates.clientPKCS12Password.utf8),
            trusting: [fixture.certificates.caCertificate]
        ).makeConfiguration()
        var frames = FrameBuilder()
        frames.command2(1, token: TestTokens.token(1), payload: self.payload)
        frames.command2(items: [(3, UInt32(2).bigEndianBytes)])
        let reply = try await RawTLSClient.exchange(port: fixture.binaryPort, tls: tls, bytes: frames.buffer)
        #expect(Array(reply.readableBytesView) == [8, 2, 0, 0, 0, 2])
        #expect(fixture.ledger.snapshot().accepted == 1)
    }

    @Test func wrongPKCS12PasswordIsAClearError() throws {
        let certificates = try TestCertificates.shared()
        let error = #expect(throws: TransportError.self) {
            _ = try ClientTLS.pkcs12(path: certificates.clientPKCS12, password: Array("hunter2-not-it".utf8)).makeConfiguration()
        }
        #expect(error?.code == .unusableCredential)
        #expect(error?.description.contains(certificates.clientPKCS12) == true)
        #expect(error?.description.contains("hunter2") == false)  // the password is never echoed
    }
}
