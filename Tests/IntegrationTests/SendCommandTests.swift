import APNSMockServer
import Foundation
import PushFleetAPI
import PushFleetCore
import PushFleetTestSupport
import Testing

/// `pushfleet send`: a token file straight to the simulator, as a process, over the provider API
/// with either credential and over the binary protocol; every token answered once and each
/// rejection printed.
@Suite struct SendCommandTests {
    private static let payload = #"{"aps":{"alert":"Ding dong"}}"#

    private static func writeTokens(_ tokens: [DeviceToken]) throws -> String {
        let file = NSTemporaryDirectory() + "pushfleet-send-\(UInt64.random(in: 1...UInt64.max)).txt"
        try tokens.map(\.hexString).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    private static func summary(_ output: String) throws -> [String: Any] {
        let last = try #require(output.split(separator: "\n").last, "no summary: \(output.suffix(500))")
        return try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any], "\(last)")
    }

    @Test(arguments: [true, false])
    func sendsAFileOverHTTP2AndPrintsEachRejection(providerToken: Bool) async throws {
        let tokens = TestTokens.tokens(3_000, seed: UInt64.random(in: 1...UInt64.max))
        let invalid = Set(tokens[10..<13])
        let unregistered = Set(tokens[20..<22])
        let fixture = try await HTTP2GatewayFixture.start(invalidTokens: invalid, unregisteredTokens: unregistered)
        defer { Task { await fixture.stop() } }
        let file = try Self.writeTokens(tokens)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let certificates = fixture.certificates
        let credentials = providerToken
            ? ["--auth-key", certificates.authKey, "--key-id", HTTP2GatewayFixture.keyID, "--team-id", HTTP2GatewayFixture.teamID]
            : ["--cert", certificates.clientCertificate, "--key", certificates.clientKey]

        // The simulator shares this test process with dozens of suites at once: an answer overdue
        // by the default 10 s would give a connection up and send its requests again (counted,
        // with cause), and this test asserts no repeats.
        let result = try await PushFleetProcess.run(
            ["send", "--protocol", "http2", "--endpoint", "127.0.0.1:\(fixture.port)", "--ca", certificates.caCertificate,
             "--topic", "com.example.send", "--tokens", file, "--payload", Self.payload, "--connections", "2",
             "--answer-timeout-ms", "300000", "--json"] + credentials
        )
        #expect(result.status == 0, "\(result.error.suffix(2_000))")
        let rejections = Self.rejections(result.output)
        #expect(Set(rejections.filter { $0.reason == "BadDeviceToken" }.map(\.token)) == Set(invalid.map(\.hexString)))
        #expect(Set(rejections.filter { $0.reason == "Unregistered" }.map(\.token)) == Set(unregistered.map(\.hexString)))
        #expect(rejections.count == invalid.count + unregistered.count)
        let summary = try Self.summary(result.output)
        #expect(summary["notifications"] as? Int == tokens.count)
        #expect(summary["accepted"] as? Int == tokens.count - invalid.count - unregistered.count)
        #expect(summary["unsettled"] as? Int == 0)
        #expect(summary["connections_opened"] as? Int == 2)
        #expect(summary["request_timeouts"] as? Int == 0)
        let ledger = fixture.server.ledger.snapshot()
        #expect(ledger.accepted == tokens.count - invalid.count - unregistered.count)
        #expect(ledger.duplicateDeliveries == 0)
    }

    /// The same over the binary protocol, the least kind case for it: 40 invalid tokens spread
    /// over the file, each of which ends its connection, and every frame written after it in vain.
    /// Each is printed once as `InvalidToken`; every other token is delivered once.
    @Test func sendsAFileOverBinaryAndPrintsEachRejection() async throws {
        let tokens = TestTokens.tokens(4_000, seed: UInt64.random(in: 1...UInt64.max))
        let invalid = Set(stride(from: 50, to: tokens.count, by: 100).map { tokens[$0] })
        let fixture = try await BinaryFixture.start(invalidTokens: invalid)
        defer { Task { await fixture.stop() } }
        let file = try Self.writeTokens(tokens)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let certificates = fixture.certificates
        let result = try await PushFleetProcess.run(
            ["send", "--protocol", "binary", "--endpoint", "127.0.0.1:\(fixture.binaryPort)", "--ca", certificates.caCertificate,
             "--cert", certificates.clientCertificate, "--key", certificates.clientKey, "--tokens", file, "--payload", Self.payload,
             "--connections", "2", "--json"]
        )
        #expect(result.status == 0, "\(result.error.suffix(2_000))")
        let rejections = Self.rejections(result.output)
        #expect(rejections.count == invalid.count)
        #expect(Set(rejections.map(\.token)) == Set(invalid.map(\.hexString)))
        #expect(rejections.allSatisfy { $0.reason == "InvalidToken" })
        let summary = try Self.summary(result.output)
        #expect(summary["notifications"] as? Int == tokens.count)
        #expect(summary["accepted"] as? Int == tokens.count - invalid.count)
        #expect(summary["rejected"] as? [String: Int] == ["InvalidToken": invalid.count])
        #expect(summary["unsettled"] as? Int == 0)
        let ledger = fixture.ledger.snapshot()
        #expect(ledger.accepted == tokens.count - invalid.count)
        #expect(ledger.duplicateDeliveries == 0)
    }

    /// The binary protocol's frames carry 32-byte tokens: a longer one is refused with its own line
    /// of the file (not the last line read with it) and its byte count, and the run fails.
    @Test func aTokenOfTheWrongSizeForBinaryNamesItsLine() async throws {
        let tokens = TestTokens.tokens(6, seed: UInt64.random(in: 1...UInt64.max))
        let long = String(repeating: "ab", count: 64)
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let file = NSTemporaryDirectory() + "pushfleet-send-\(UInt64.random(in: 1...UInt64.max)).txt"
        let lines = tokens[0..<2].map(\.hexString) + [long] + tokens[2...].map(\.hexString)
        try lines.joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let certificates = fixture.certificates
        let result = try await PushFleetProcess.run(
            ["send", "--protocol", "binary", "--endpoint", "127.0.0.1:\(fixture.binaryPort)", "--ca", certificates.caCertificate,
             "--cert", certificates.clientCertificate, "--key", certificates.clientKey, "--tokens", file, "--payload", Self.payload,
             "--json"]
        )
        #expect(result.status != 0)
        #expect(result.error.contains("\(file):3: the token is 64 bytes (128 hex digits)"), "\(result.error.suffix(1_000))")
    }

    /// A provider token APNs refuses (a team id it does not know): every notification's answer is
    /// the provider's refusal, printed for its token and counted by its reason; nothing delivered,
    /// and the command fails naming the gateway and the reason (before, it exited 0). APNs failing
    /// (503 to every request) past the retries is printed so too, and fails the command as not
    /// delivered: those notifications are worth sending again, where no retry cures the refusal.
    @Test(arguments: [("NOTMYTEAM1", nil, "InvalidProviderToken"), (HTTP2GatewayFixture.teamID, 1, "ServiceUnavailable")] as [(String, Int?, String)])
    func aRefusalOverHTTP2IsPrintedForEachToken(teamID: String, serviceUnavailableEvery: Int?, reason: String) async throws {
        let tokens = TestTokens.tokens(40, seed: UInt64.random(in: 1...UInt64.max))
        let fixture = try await HTTP2GatewayFixture.start(faults: .init(serviceUnavailableEvery: serviceUnavailableEvery))
        defer { Task { await fixture.stop() } }
        let file = try Self.writeTokens(tokens)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let certificates = fixture.certificates
        let result = try await PushFleetProcess.run(
            ["send", "--protocol", "http2", "--endpoint", "127.0.0.1:\(fixture.port)", "--ca", certificates.caCertificate,
             "--auth-key", certificates.authKey, "--key-id", HTTP2GatewayFixture.keyID, "--team-id", teamID,
             "--topic", "com.example.send", "--tokens", file, "--payload", Self.payload, "--answer-timeout-ms", "300000", "--json"]
        )
        #expect(result.status != 0)
        if serviceUnavailableEvery == nil {
            #expect(
                result.error.contains("40 notifications were not delivered: 127.0.0.1:\(fixture.port) refused the provider or was not trusted (InvalidProviderToken)"),
                "\(result.error.suffix(1_000))"
            )
        } else {
            #expect(result.error.contains("40 notifications were not delivered: APNs at 127.0.0.1:\(fixture.port) kept failing"), "\(result.error.suffix(1_000))")
        }
        let rejections = Self.rejections(result.output)
        #expect(Set(rejections.map(\.token)) == Set(tokens.map(\.hexString)))
        #expect(rejections.count == tokens.count && rejections.allSatisfy { $0.reason == reason })
        let summary = try Self.summary(result.output)
        #expect(summary["accepted"] as? Int == 0)
        #expect(summary["rejected"] as? [String: Int] == [reason: tokens.count])
        #expect(summary["unsettled"] as? Int == 0)
        #expect(fixture.server.ledger.snapshot().accepted == 0)
    }

    /// TLS refused, on either protocol: a gateway certificate that `--ca` does not cover (the
    /// sender refuses it), and a client certificate from a CA the gateway does not trust (the
    /// gateway refuses it). Every notification is printed with its reason and the command fails
    /// naming the gateway; before, it printed `TLSFailure` for each token and exited 0. (A refused
    /// client certificate whose alert loses the race with the connection's reset reads as an
    /// outage, `ConnectionLost`, and fails the command as not delivered: either way not 0.)
    @Test(arguments: ["http2", "binary"], [true, false])
    func aRefusedCertificateFailsTheCommand(_ wire: String, untrustedGateway: Bool) async throws {
        let fixture = try await BinaryFixture.start()
        defer { Task { await fixture.stop() } }
        let certificates = fixture.certificates
        let tokens = TestTokens.tokens(30, seed: 11)
        let file = try Self.writeTokens(tokens)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let port = wire == "http2" ? try #require(fixture.ports.http2) : fixture.binaryPort
        let roots = untrustedGateway ? certificates.directory + "/rogue-ca.pem" : certificates.caCertificate
        let credentials = untrustedGateway
            ? ["--cert", certificates.clientCertificate, "--key", certificates.clientKey]
            : ["--cert", certificates.rogueClientCertificate, "--key", certificates.rogueClientKey]
        let result = try await PushFleetProcess.run(
            ["send", "--protocol", wire, "--endpoint", "127.0.0.1:\(port)", "--ca", roots, "--tokens", file, "--payload", Self.payload,
             "--json"] + credentials + (wire == "http2" ? ["--topic", "com.example.send"] : [])
        )
        #expect(result.status != 0)
        let rejections = Self.rejections(result.output)
        #expect(Set(rejections.map(\.token)) == Set(tokens.map(\.hexString)))
        if untrustedGateway {
            #expect(
                result.error.contains("30 notifications were not delivered: 127.0.0.1:\(port) refused the provider or was not trusted (TLSFailure)"),
                "\(result.error.suffix(1_000))"
            )
            #expect(rejections.allSatisfy { $0.reason == "TLSFailure" })
        } else {
            #expect(result.error.contains("30 notifications were not delivered"), "\(result.error.suffix(1_000))")
            #expect(result.error.contains("127.0.0.1:\(port)"), "\(result.error.suffix(1_000))")
            #expect(rejections.allSatisfy { $0.reason == "TLSFailure" || $0.reason == "ConnectionLost" }, "\(rejections.map(\.reason))")
        }
        let summary = try Self.summary(result.output)
        #expect(summary["accepted"] as? Int == 0)
        #expect(summary["unsettled"] as? Int == 0)
        #expect(fixture.ledger.snapshot().accepted == 0)
    }

    /// The `TOKEN<TAB>REASON` lines of `send`'s output.
    private static func rejections(_ output: String) -> [(token: String, reason: String)] {
        output.split(separator: "\n").filter { $0.contains("\t") }.map { line in
            let parts = line.split(separator: "\t")
            return (token: String(parts[0]), reason: String(parts[1]))
        }
    }

    /// Against a port where nothing listens, five connections fail in a row: every notification is
    /// refused as an outage (`CannotConnect`), printed for its token, and the run fails naming the
    /// endpoint, long before `--timeout-s`. Before, the sender reconnected until the timeout (over
    /// the binary protocol, for ever).
    @Test(arguments: ["http2", "binary"])
    func anUnreachableEndpointFailsEveryNotificationWithWhy(_ wire: String) async throws {
        let certificates = try TestCertificates.shared()
        let tokens = TestTokens.tokens(50, seed: 7)
        let file = try Self.writeTokens(tokens)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let port = try FreePort.take()
        let credentials = wire == "http2"
            ? ["--auth-key", certificates.authKey, "--key-id", HTTP2GatewayFixture.keyID, "--team-id", HTTP2GatewayFixture.teamID, "--topic", "com.example.send"]
            : ["--cert", certificates.clientCertificate, "--key", certificates.clientKey]
        let result = try await PushFleetProcess.run(
            ["send", "--protocol", wire, "--endpoint", "127.0.0.1:\(port)", "--ca", certificates.caCertificate, "--tokens", file,
             "--payload", Self.payload, "--json"] + credentials
        )
        #expect(result.status != 0)
        #expect(result.error.contains("50 notifications were not delivered: APNs at 127.0.0.1:\(port) kept failing"), "\(result.error.suffix(1_000))")
        #expect(result.error.contains("cannot connect to 127.0.0.1:\(port)"), "the log says why: \(result.error.suffix(1_000))")
        let rejections = Self.rejections(result.output)
        #expect(Set(rejections.map(\.token)) == Set(tokens.map(\.hexString)))
        #expect(rejections.allSatisfy { $0.reason == "CannotConnect" })
        let summary = try Self.summary(result.output)
        #expect(summary["unsettled"] as? Int == 0)
        #expect(summary["accepted"] as? Int == 0)
        #expect((summary["connect_failures"] as? Int ?? 0) >= 5)
    }

    @Test func theProtocolsCredentialsAndTopicAreChecked() async throws {
        let certificates = try TestCertificates.shared()
        let base = ["send", "--tokens", "-", "--payload", Self.payload, "--ca", certificates.caCertificate]
        let token = ["--auth-key", certificates.authKey, "--key-id", "K", "--team-id", "T"]
        let certificate = ["--cert", certificates.clientCertificate, "--key", certificates.clientKey]
        for (arguments, message) in [
            (["--protocol", "http2"] + token, "HTTP/2 needs --topic"),
            (["--protocol", "http2", "--topic", "t"], "HTTP/2 needs one of"),
            (["--protocol", "http2", "--topic", "t"] + token + certificate, "HTTP/2 needs one of"),
            (["--protocol", "binary"] + token + certificate, "the binary protocol has no provider tokens"),
            (["--protocol", "binary", "--topic", "t"] + certificate, "the binary protocol has no --topic"),
            (["--protocol", "http3", "--topic", "t"] + certificate, "--protocol is http2 or binary"),
        ] {
            let result = try await PushFleetProcess.run(base + arguments)
            #expect(result.status != 0)
            #expect(result.error.contains(message), "\(arguments): \(result.error.suffix(500))")
        }
    }
}
