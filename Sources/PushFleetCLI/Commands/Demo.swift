import APNSMockServer
import APNSTransport
import APNSWire
import ArgumentParser
import Foundation
import NIOCore
import NIOPosix
import PushFleetCore

/// The whole binary path on this machine: the simulator, a campaign through the sender with a
/// live progress bar, the feedback service polled, and the reconciliation against the ledger.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a campaign against the bundled APNs simulator and reconcile it with the simulator's ledger."
    )

    @Option(help: "Tokens in the campaign.")
    var tokens: Int = 1_000_000

    @Option(help: "Percentage of tokens the simulator answers with InvalidToken.")
    var invalidPercent: Double = 1

    @Option(help: "Percentage of tokens the simulator reports through the feedback service.")
    var unregisteredPercent: Double = 1

    @Option(help: "The simulator's error delay in milliseconds (APNs took 100 to 1000).")
    var errorDelayMs: Int = 100

    @Option(help: "Connections to the gateway.")
    var connections: Int = 8

    @Option(help: "Directory with the test PKI (scripts/make-test-certs.sh).")
    var certs: String

    func validate() throws {
        guard self.tokens > 0 else { throw ValidationError("--tokens must be positive") }
        guard (0...100).contains(self.invalidPercent), (0...100).contains(self.unregisteredPercent),
            self.invalidPercent + self.unregisteredPercent <= 100
        else { throw ValidationError("--invalid-percent and --unregistered-percent are percentages that add up to 100 at most") }
    }

    func run() async throws {
        let audience = DemoAudience(count: self.tokens, invalidPercent: self.invalidPercent, unregisteredPercent: self.unregisteredPercent)
        let mock = MockAPNSServer(
            configuration: MockAPNSConfiguration(
                binaryPort: 0, feedbackPort: 0, adminPort: 0,
                tls: .init(certificateChain: "\(self.certs)/server.pem", privateKey: "\(self.certs)/server-key.pem", clientCA: "\(self.certs)/ca.pem"),
                invalidTokens: audience.invalid,
                unregisteredTokens: audience.unregistered,
                errorDelay: .milliseconds(Int64(self.errorDelayMs))
            ),
            group: MultiThreadedEventLoopGroup.singleton
        )
        let ports = try await mock.start()
        defer { Task { try? await mock.shutdown() } }
        print("mock-apns: binary gateway 127.0.0.1:\(ports.binary!), feedback 127.0.0.1:\(ports.feedback!), ledger http://127.0.0.1:\(ports.admin!)/stats")
        print("campaign: \(self.tokens) tokens (\(audience.invalid.count) invalid, \(audience.unregistered.count) unregistered), \(self.connections) connections, error delay \(self.errorDelayMs) ms")

        let clientTLS = ClientTLS.certificate(pem: "\(self.certs)/client.pem", key: "\(self.certs)/client-key.pem", trusting: ["\(self.certs)/ca.pem"])
        let delivery = BinaryDelivery(
            configuration: BinarySender.Configuration(host: "127.0.0.1", port: ports.binary!, tls: try clientTLS.makeConfiguration(), serverHostname: "localhost"),
            connections: self.connections,
            payload: try APSPayload(alert: .text("叮咚 · Ding dong: someone is at the door"), sound: "default").payload(for: .binaryFrame)
        )
        let bar = ProgressBar(total: self.tokens)
        var offset = 0
        let started = monotonicSeconds()
        let result = try await delivery.run(
            next: {
                let batch = audience.tokens[offset..<min(offset + 1_000, audience.tokens.count)]
                offset += batch.count
                return Array(batch)
            },
            progress: { bar.draw(done: $0) }
        )
        bar.finish()
        let seconds = monotonicSeconds() - started

        let feedback = try await FeedbackClient.fetch(
            host: "127.0.0.1", port: ports.feedback!, tls: clientTLS, serverHostname: "localhost", eventLoop: MultiThreadedEventLoopGroup.singleton.next()
        )
        let report = Reconciliation(audience: audience, result: result, ledger: mock.ledger, feedback: feedback, seconds: seconds)
        print(report.text)
        if !report.isExact { throw ExitCode(1) }
    }
}

/// A synthetic audience: random tokens, a share marked invalid and a share unregistered.
struct DemoAudience {
    let tokens: [DeviceToken]
    let invalid: Set<DeviceToken>
    let unregistered: Set<DeviceToken>

    init(count: Int, invalidPercent: Double, unregisteredPercent: Double) {
        var generator = SystemRandomNumberGenerator()
        var tokens: [DeviceToken] = []
        tokens.reserveCapacity(count)
        var seen = Set<DeviceToken>()
        while tokens.count < count {
            let bytes = (0..<4).flatMap { _ in withUnsafeBytes(of: generator.next() as UInt64) { Array($0) } }
            let token = try! DeviceToken(bytes: bytes)
            if seen.insert(token).inserted { tokens.append(token) }
        }
        self.tokens = tokens
        // Spread evenly: every k-th token, as in the write-ups' experiment.
        func every(_ percent: Double, offset: Int) -> Set<DeviceToken> {
            guard percent > 0 else { return [] }
            let wanted = Int((Double(count) * percent / 100).rounded())
            guard wanted > 0 else { return [] }
            let step = max(1, count / wanted)
            return Set(stride(from: offset % step, to: count, by: step).prefix(wanted).map { tokens[$0] })
        }
        self.invalid = every(invalidPercent, offset: 0)
        self.unregistered = every(unregisteredPercent, offset: 1).subtracting(self.invalid)
    }
}

/// What was sent against what the simulator's ledger holds.
struct Reconciliation {
    let text: String
    let isExact: Bool

    init(audience: DemoAudience, result: BinaryDelivery.Result, ledger: DeliveryLedger, feedback: [FeedbackTuple], seconds: Double) {
        var lost = 0
        var duplicated = 0
        var delivered = 0
        for token in audience.tokens where !audience.invalid.contains(token) {
            let count = ledger.deliveries(of: token)
            if count == 0 { lost += 1 }
            if count > 1 { duplicated += 1 }
            delivered += 1
        }
        let wronglyDelivered = audience.invalid.count { ledger.deliveries(of: $0) > 0 }
        let feedbackTokens = Set(feedback.map(\.token))
        let snapshot = ledger.snapshot()
        let rejected = result.rejected.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        self.isExact = lost == 0 && wronglyDelivered == 0 && result.accepted + result.rejectedCount == audience.tokens.count
            && result.rejected == (audience.invalid.isEmpty ? [:] : ["InvalidToken": audience.invalid.count])
            && feedbackTokens == audience.unregistered && result.unsettled == 0
        self.text = """

            reconciliation (\(String(format: "%.1f", seconds)) s, \(Int(Double(audience.tokens.count) / max(seconds, 1e-9)))/s)
              total                      \(audience.tokens.count)
              accepted (sender)          \(result.accepted)
              rejected (sender)          \(result.rejectedCount)  [\(rejected)]
              accepted + rejected        \(result.accepted + result.rejectedCount)
              ledger: delivered tokens   \(delivered - lost) of \(delivered) valid   lost \(lost)   duplicated \(duplicated)
              ledger: invalid delivered  \(wronglyDelivered)
              feedback service           \(feedback.count) unregistered tokens reported (\(audience.unregistered.count) expected)
              connections opened         \(result.statistics.connectionsOpened)   sentinels \(result.statistics.sentinels)   frames written in vain \(result.statistics.framesResent)
              simulator                  accepted \(snapshot.accepted), rejected \(snapshot.rejected.values.reduce(0, +)) (sentinels included)
            \(self.isExact ? "✔ exact: every valid token delivered once, every invalid token rejected, every unregistered token reported" : "✘ NOT EXACT: see the counts above")
            """
    }
}
