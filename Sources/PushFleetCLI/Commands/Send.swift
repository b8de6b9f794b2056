import APNSTransport
import APNSWire
import ArgumentParser
import Foundation
import NIOCore
import PushFleetCore
import PushFleetServices

/// Sends one payload to the tokens of a file directly, without Redis or Postgres: the small case
/// (a doorbell that must reach every phone of a household, now) and the sender benchmark.
struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one notification to every token of a file, directly over the binary protocol or HTTP/2.",
        discussion: """
            Rejected tokens are printed on standard output as "TOKEN<TAB>REASON"; a summary goes to \
            standard error (or, with --json, one JSON object to standard output instead). The exit \
            status is not 0 when a notification has no answer at the end, APNs kept failing for it \
            (5xx, 429 or no answer past the retries), or the provider was refused (its credentials, \
            topic or certificate, or a gateway certificate --ca does not cover). Over HTTP/2 \
            give --topic, and either --auth-key with --key-id and --team-id, or a client certificate.
            """
    )

    @Option(help: "binary (the legacy protocol) or http2 (the provider API). (default: binary)", transform: DeliveryProtocol.option("--protocol"))
    var `protocol`: DeliveryProtocol = .binary

    @Option(help: "Token file, one hex token per line ('-' for standard input).")
    var tokens: String

    @Option(help: "The payload: JSON text, or @FILE.")
    var payload: String

    @Option(help: "production or sandbox: picks Apple's gateway when --endpoint is not given. (default: production)", transform: APNsEnvironment.option("--environment"))
    var environment: APNsEnvironment = .production

    @Option(help: "Gateway HOST:PORT, e.g. a mock-apns.")
    var endpoint: String?

    @Option(help: "The app's bundle id (apns-topic); HTTP/2 only.")
    var topic: String?

    @Option(help: "apns-push-type; HTTP/2 only.")
    var pushType: String = "alert"

    @Option(help: "Connections to open at once.")
    var connections: Int = 1

    @Option(help: "Seconds to wait for every answer; HTTP/2 only (its sender keeps reconnecting to an APNs that is down).")
    var timeoutS: Int = 300

    @Option(help: "Milliseconds to wait for an answer before giving its connection up (its unanswered requests are sent again on another); HTTP/2 only.")
    var answerTimeoutMs: Int = 10_000

    @Option(help: "10 (now) or 5 (power-conserving).")
    var priority: UInt8 = 10

    @Option(help: "Epoch seconds after which APNs may drop the notification; 0 = don't store.")
    var expiration: UInt32 = 0

    @Option(help: "Frames between two proofs (sentinel frames); bounds re-sends after a silent drop.")
    var confirmEvery: Int = 20_000

    @Option(help: "Milliseconds to wait for a proof before giving a connection up; above the gateway's error delay.")
    var confirmationTimeoutMs: Int = 5_000

    @Flag(help: "Print a JSON summary on standard output.")
    var json = false

    @OptionGroup var tls: TLSOptions
    @OptionGroup var providerToken: ProviderTokenOptions

    func validate() throws {
        try self.providerToken.validate(protocol: self.protocol, tls: self.tls)
        if self.protocol == .http2 {
            guard let topic = self.topic, !topic.isEmpty else { throw ValidationError("HTTP/2 needs --topic (the app's bundle id)") }
            guard self.timeoutS > 0 else { throw ValidationError("--timeout-s is at least 1") }
            guard self.answerTimeoutMs > 0 else { throw ValidationError("--answer-timeout-ms is at least 1") }
        } else {
            guard self.topic == nil else { throw ValidationError("the binary protocol has no --topic: the certificate names the app") }
        }
        guard self.priority == 10 || self.priority == 5 else { throw ValidationError("--priority is 10 or 5") }
        guard (1...64).contains(self.connections) else { throw ValidationError("--connections is between 1 and 64") }
    }

    /// What a run gives the summary, whichever the protocol.
    private struct Outcome: DeliveryTally {
        var accepted: Int
        var rejections: [Rejection]
        var outages: Int
        var refusals: [RejectionReason: Int]
        var unsettled: Int
        /// The protocol's own counters, in summary order.
        var counters: [(String, Int)]
    }

    /// A value of the summary: a count, a number to some decimals, or counts by reason.
    private enum SummaryValue: Encodable {
        case count(Int)
        case decimal(Double, places: Int)
        case reasons([String: Int])

        /// As the summary on standard error shows it (a decimal with all its places).
        var text: String {
            switch self {
            case .count(let count): "\(count)"
            case .decimal(let value, let places): String(format: "%.\(places)f", value)
            case .reasons(let reasons): PushFleetJSON.encode(reasons)
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .count(let count): try container.encode(count)
            case .decimal(let value, let places): try container.encode(PushFleetJSON.rounded(value, places: places))
            case .reasons(let reasons): try container.encode(reasons)
            }
        }
    }

    func run() async throws {
        let reader = try TokenFileReader(path: self.tokens)
        var readError: (any Error)? = nil
        var count = 0
        // The whole file is checked as it streams; a bad line stops the run with its location.
        let next = { () -> [DeviceToken] in
            do {
                let batch = try reader.read(upTo: 1_000)
                if self.protocol == .binary {
                    for (index, token) in batch.enumerated() where token.count != DeviceToken.binaryProtocolByteCount {
                        let line = reader.lineOf(tokenAtBatchIndex: index)
                        let error = DeviceTokenError.wrongSize(byteCount: token.count, required: DeviceToken.binaryProtocolByteCount, protocolName: "binary protocol")
                        throw CLIError("\(reader.path):\(line): \(error)")
                    }
                }
                count += batch.count
                return batch
            } catch {
                readError = error
                return []
            }
        }
        let started = monotonicSeconds()
        let cpuBefore = ProcessUsage.now()
        let (endpoint, outcome) = self.protocol == .binary ? try await self.sendBinary(next) : try await self.sendHTTP2(next)
        let seconds = monotonicSeconds() - started
        let usage = ProcessUsage.now()
        if let readError { throw readError }

        for rejection in outcome.rejections { print("\(rejection.token)\t\(rejection.reason)") }
        let cpu = usage.cpuSeconds - cpuBefore.cpuSeconds
        let summary: [(String, SummaryValue)] = [
            ("notifications", .count(count)),
            ("accepted", .count(outcome.accepted)),
            ("rejected", .reasons(outcome.rejected)),
            ("unsettled", .count(outcome.unsettled)),
            ("seconds", .decimal(seconds, places: 3)),
            ("per_second", .decimal(Double(count) / max(seconds, 1e-9), places: 0)),
            ("cpu_seconds", .decimal(cpu, places: 3)),
            ("cpu_us_per_notification", .decimal(count > 0 ? cpu * 1e6 / Double(count) : 0, places: 2)),
            ("max_rss_mb", .decimal(Double(usage.maxResidentBytes) / 1_048_576, places: 1)),
        ] + outcome.counters.map { ($0.0, .count($0.1)) }
        if self.json {
            print(PushFleetJSON.encode(Dictionary(uniqueKeysWithValues: summary)))
        } else {
            FileHandle.standardError.write(Data((summary.map { "\($0.0): \($0.1.text)" }.joined(separator: "\n") + "\n").utf8))
        }
        if outcome.unsettled > 0 {
            throw CLIError("\(outcome.unsettled) notifications could not be settled with \(endpoint)")
        }
        if outcome.outages > 0 {
            // Not the tokens' fault and not delivered: worth sending again, so not a success.
            throw CLIError("\(outcome.outages) notifications were not delivered: APNs at \(endpoint) kept failing (printed with its reason)")
        }
        if !outcome.refusals.isEmpty {
            // No token's fault either, and no retry cures it: the credentials, topic or trust roots must change.
            let count = outcome.refusals.values.reduce(0, +)
            let reasons = outcome.refusals.keys.map(\.rawValue).sorted().joined(separator: ", ")
            throw CLIError(
                "\(count) notifications were not delivered: \(endpoint) refused the provider or was not trusted (\(reasons)); "
                    + "check the credentials, --topic and --ca"
            )
        }
    }

    private func sendBinary(_ next: () throws -> [DeviceToken]) async throws -> (Endpoint, Outcome) {
        let payload = try PayloadOption.load(self.payload, format: .binaryFrame)
        let endpoint = try self.endpoint.map { try Endpoint(parsing: $0, option: "--endpoint") }
            ?? Endpoint(host: self.environment.binaryHost, port: 2195)
        let configuration = BinarySender.Configuration(
            host: endpoint.host,
            port: endpoint.port,
            tls: try self.tls.clientTLS().makeConfiguration(),
            confirmEvery: self.confirmEvery,
            confirmationTimeout: .milliseconds(Int64(self.confirmationTimeoutMs))
        )
        let delivery = BinaryDelivery(configuration: configuration, connections: self.connections, payload: payload, priority: self.priority, expiration: self.expiration)
        let result = try await delivery.run(next: next, progress: { _ in })
        return (endpoint, Outcome(
            accepted: result.accepted, rejections: result.rejections, outages: result.outages,
            refusals: result.refusals, unsettled: result.unsettled,
            counters: [
                ("connections_opened", result.statistics.connectionsOpened),
                ("frames_written", result.statistics.framesWritten),
                ("frames_written_in_vain", result.statistics.framesResent),
                ("sentinels", result.statistics.sentinels),
                ("silent_closes", result.statistics.silentCloses),
                ("connect_failures", result.statistics.connectFailures),
            ]
        ))
    }

    private func sendHTTP2(_ next: () throws -> [DeviceToken]) async throws -> (Endpoint, Outcome) {
        let payload = try PayloadOption.load(self.payload, format: .http2(pushType: self.pushType))
        let endpoint = try self.endpoint.map { try Endpoint(parsing: $0, option: "--endpoint") }
            ?? Endpoint(host: self.environment.http2Host, port: 443)
        let (tls, authentication) = try self.providerToken.http2Credentials(tls: self.tls)
        let configuration = HTTP2Sender.Configuration(
            host: endpoint.host, port: endpoint.port, tls: tls, authentication: authentication, connections: self.connections,
            connectionSpacing: .zero, requestTimeout: .milliseconds(Int64(self.answerTimeoutMs))
        )
        let template = HTTP2NotificationTemplate(
            topic: self.topic ?? "", pushType: self.pushType, priority: Int(self.priority), expiration: Int64(self.expiration), payload: payload
        )
        let delivery = HTTP2Delivery(configuration: configuration, template: template, timeout: .seconds(self.timeoutS))
        let result = try await delivery.run(next: next)
        let statistics = result.statistics
        return (endpoint, Outcome(
            accepted: result.accepted, rejections: result.rejections, outages: result.outages,
            refusals: result.refusals, unsettled: result.unsettled,
            counters: [
                ("connections_opened", statistics.connectionsOpened),
                ("requests_written", statistics.requestsWritten),
                ("retries", statistics.retries),
                ("resent_after_connection_loss", statistics.resentAfterConnectionLoss),
                ("go_aways", statistics.goAways),
                ("request_timeouts", statistics.requestTimeouts),
                ("connect_failures", statistics.connectFailures),
            ]
        ))
    }
}
