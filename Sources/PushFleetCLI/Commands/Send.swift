import APNSTransport
import APNSWire
import ArgumentParser
import Foundation
import NIOCore
import PushFleetCore

/// Sends one payload to the tokens of a file directly, without Redis or Postgres: the small case
/// (a doorbell that must reach every phone of a household, now) and the sender benchmark.
struct Send: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one notification to every token of a file, directly over the binary protocol.",
        discussion: """
            Rejected tokens are printed on standard output as "TOKEN<TAB>REASON"; a summary goes to \
            standard error (or, with --json, one JSON object to standard output instead).
            """
    )

    @Option(help: "Token file, one hex token per line ('-' for standard input).")
    var tokens: String

    @Option(help: "The payload: JSON text, or @FILE.")
    var payload: String

    @Option(help: "production or sandbox: picks Apple's gateway when --endpoint is not given.")
    var environment: String = "production"

    @Option(help: "Gateway HOST:PORT, e.g. a mock-apns.")
    var endpoint: String?

    @Option(help: "Connections to open at once.")
    var connections: Int = 1

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

    func validate() throws {
        guard ["production", "sandbox"].contains(self.environment) else { throw ValidationError("--environment is production or sandbox") }
        guard self.priority == 10 || self.priority == 5 else { throw ValidationError("--priority is 10 or 5") }
        guard (1...64).contains(self.connections) else { throw ValidationError("--connections is between 1 and 64") }
    }

    func run() async throws {
        let payload = try PayloadOption.load(self.payload, format: .binaryFrame)
        let endpoint = try self.endpoint.map { try Endpoint(parsing: $0, option: "--endpoint") }
            ?? Endpoint(host: self.environment == "sandbox" ? "gateway.sandbox.push.apple.com" : "gateway.push.apple.com", port: 2195)
        let configuration = BinarySender.Configuration(
            host: endpoint.host,
            port: endpoint.port,
            tls: try self.tls.clientTLS().makeConfiguration(),
            confirmEvery: self.confirmEvery,
            confirmationTimeout: .milliseconds(Int64(self.confirmationTimeoutMs))
        )
        let reader = try TokenFileReader(path: self.tokens)
        var readError: (any Error)? = nil
        let delivery = BinaryDelivery(configuration: configuration, connections: self.connections, payload: payload, priority: self.priority, expiration: self.expiration)

        let started = monotonicSeconds()
        let cpuBefore = ProcessUsage.now()
        var count = 0
        let result = try await delivery.run(
            next: {
                // The whole file is checked as it streams; a bad line stops the run with its location.
                do {
                    let batch = try reader.read(upTo: 1_000)
                    for token in batch where token.count != DeviceToken.binaryProtocolByteCount {
                        throw CLIError("\(reader.path):\(reader.lineNumber): \(DeviceTokenError.wrongSize(byteCount: token.count, required: 32, protocolName: "binary protocol"))")
                    }
                    count += batch.count
                    return batch
                } catch {
                    readError = error
                    return []
                }
            },
            progress: { _ in }
        )
        let seconds = monotonicSeconds() - started
        let usage = ProcessUsage.now()
        if let readError { throw readError }

        for (token, status) in result.rejectedTokens { print("\(token)\t\(status.name)") }
        let cpu = usage.cpuSeconds - cpuBefore.cpuSeconds
        let summary: [(String, String)] = [
            ("notifications", "\(count)"),
            ("accepted", "\(result.accepted)"),
            ("rejected", "{" + result.rejected.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"),
            ("unsettled", "\(result.unsettled)"),
            ("seconds", String(format: "%.3f", seconds)),
            ("per_second", String(format: "%.0f", Double(count) / max(seconds, 1e-9))),
            ("cpu_seconds", String(format: "%.3f", cpu)),
            ("cpu_us_per_notification", String(format: "%.2f", count > 0 ? cpu * 1e6 / Double(count) : 0)),
            ("max_rss_mb", String(format: "%.1f", Double(usage.maxResidentBytes) / 1_048_576)),
            ("connections_opened", "\(result.statistics.connectionsOpened)"),
            ("frames_written", "\(result.statistics.framesWritten)"),
            ("frames_written_in_vain", "\(result.statistics.framesResent)"),
            ("sentinels", "\(result.statistics.sentinels)"),
            ("silent_closes", "\(result.statistics.silentCloses)"),
            ("connect_failures", "\(result.statistics.connectFailures)"),
        ]
        if self.json {
            print("{" + summary.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}")
        } else {
            FileHandle.standardError.write(Data((summary.map { "\($0.0): \($0.1)" }.joined(separator: "\n") + "\n").utf8))
        }
        if result.unsettled > 0 {
            throw CLIError("\(result.unsettled) notifications could not be settled with \(endpoint)")
        }
    }
}
