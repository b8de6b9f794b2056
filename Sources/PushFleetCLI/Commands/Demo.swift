import APNSMockServer
import ArgumentParser
import Foundation
import Logging
import NIOCore
import NIOPosix
import PushFleetCore
import PushFleetPostgres
import PushFleetServices
#if canImport(Glibc)
import Glibc
#endif

/// The whole system on this machine: the simulator, a coordinator and workers as child processes,
/// one campaign through Redis and Postgres with a live progress bar, then the reconciliation
/// against the simulator's ledger.
struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a campaign through the whole system against the bundled APNs simulator, then reconcile."
    )

    /// The provider key the demo's simulator knows (the PKI's `auth-key.p8`), under these ids.
    static let keyID = "PFDEMOKEY1"
    static let teamID = "PFDEMOTEAM"

    @Option(help: "Tokens in the campaign.")
    var tokens: Int = 1_000_000

    @Option(help: "http2 (token auth) or binary. (default: http2)", transform: DeliveryProtocol.option("--protocol"))
    var `protocol`: DeliveryProtocol = .http2

    @Option(help: "Worker processes.")
    var workers: Int = 2

    @Option(help: "Connections per worker.")
    var connections: Int = 8

    @Option(help: "Percentage of tokens the simulator answers with InvalidToken.")
    var invalidPercent: Double = 1

    @Option(help: "Percentage of tokens the simulator reports through the feedback service.")
    var unregisteredPercent: Double = 1

    @Option(help: "The simulator's error delay in milliseconds (APNs took 100 to 1000).")
    var errorDelayMs: Int = 100

    @Option(help: "Directory with the test PKI (scripts/make-test-certs.sh).")
    var certs: String

    @Option(help: "Launch the campaign with this rate limit (notifications a second, fleet-wide) and print the deliveries of each second from the simulator's ledger.")
    var rate: Int?

    @Flag(help: "Also ring a doorbell every second while the campaign runs (3 users sharing it, 2 phones each, by POST /v1/notify) and print each ring's latency to APNs acceptance. With PUSHFLEET_DEMO_TRACE set, also when the API answered each ring.")
    var doorbell = false

    @OptionGroup var state: StateOptions

    func validate() throws {
        guard self.tokens > 0 else { throw ValidationError("--tokens must be positive") }
        if let rate = self.rate, !Launcher.rateLimits.contains(rate) { throw ValidationError("--rate is 1 to 100000000 notifications a second") }
        guard (1...16).contains(self.workers), (1...64).contains(self.connections) else { throw ValidationError("--workers is 1 to 16, --connections 1 to 64") }
        guard (0...100).contains(self.invalidPercent), (0...100).contains(self.unregisteredPercent),
            self.invalidPercent + self.unregisteredPercent <= 100
        else { throw ValidationError("--invalid-percent and --unregistered-percent are percentages that add up to 100 at most") }
    }

    func run() async throws {
        let audience = DemoAudience(count: self.tokens, invalidPercent: self.invalidPercent, unregisteredPercent: self.unregisteredPercent)
        let topic = "com.example.doorbell.demo-\(String(UInt32.random(in: 0...UInt32.max), radix: 36))"
        let mock = MockAPNSServer(
            configuration: MockAPNSConfiguration(
                binaryPort: 0, feedbackPort: 0, adminPort: 0,
                tls: .init(certificateChain: "\(self.certs)/server.pem", privateKey: "\(self.certs)/server-key.pem", clientCA: "\(self.certs)/ca.pem"),
                invalidTokens: audience.invalid, unregisteredTokens: audience.unregistered,
                errorDelay: .milliseconds(Int64(self.errorDelayMs)),
                http2Port: 0,
                http2: .init(providerKeys: [try .init(keyID: Self.keyID, teamID: Self.teamID, publicKeyPEMFile: "\(self.certs)/auth-key-public.pem")])
            ),
            group: MultiThreadedEventLoopGroup.singleton,
            logger: makeLogger("pushfleet.mock-apns", level: .warning)
        )
        let ports = try await mock.start()
        defer { Task { try? await mock.shutdown() } }
        print("mock-apns   http2 127.0.0.1:\(ports.http2!)  binary 127.0.0.1:\(ports.binary!)  feedback 127.0.0.1:\(ports.feedback!)  ledger http://127.0.0.1:\(ports.admin!)/stats")
        print("campaign    \(self.tokens) tokens for \(topic): \(audience.invalid.count) invalid, \(audience.unregistered.count) unregistered")
        print("fleet       coordinator + \(self.workers) workers × \(self.connections) connections, \(self.protocol)" + (self.protocol == .binary ? ", error delay \(self.errorDelayMs) ms" : ""))

        let directory = NSTemporaryDirectory() + "pushfleet-demo-\(getpid())"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let tokenFile = directory + "/audience.txt"
        try audience.tokens.map(\.hexString).joined(separator: "\n").write(toFile: tokenFile, atomically: false, encoding: .utf8)

        let stateArguments = ["--redis", self.state.redis, "--postgres", self.state.postgres]
        let tls = ["--ca", "\(self.certs)/ca.pem", "--cert", "\(self.certs)/client.pem", "--key", "\(self.certs)/client-key.pem"]
        let fleet = ChildProcesses()
        defer { fleet.terminateAll() }
        if !audience.invalid.isEmpty || !audience.unregistered.isEmpty {
            // The audience stands for the app's devices, registered a day ago: APNs' verdicts mark
            // the tokens the registry holds (a campaign keeps them all in its failure records),
            // where the device registered before the verdict (the feedback service's is in seconds).
            let registering = monotonicSeconds()
            let registered = try await self.state.withStore(logger: makeLogger("pushfleet.demo", level: .warning)) { store in
                try await store.importTokens(audience.tokens, topic: topic, environment: .production, registeredAt: Date() - 86_400)
            }
            print("registry    \(registered) devices registered in \(String(format: "%.1f", monotonicSeconds() - registering)) s")
        }

        try fleet.start(["coordinator", "--interval-ms", "250", "--feedback-endpoint", "127.0.0.1:\(ports.feedback!)", "--feedback-topic", topic, "--feedback-interval-s", "2"] + tls + stateArguments)
        let sender: [String]
        if self.protocol == .binary {
            sender = ["--protocol", "binary", "--endpoint", "127.0.0.1:\(ports.binary!)"] + tls
        } else {
            sender = ["--protocol", "http2", "--endpoint", "127.0.0.1:\(ports.http2!)", "--ca", "\(self.certs)/ca.pem",
                      "--auth-key", "\(self.certs)/auth-key.p8", "--key-id", Self.keyID, "--team-id", Self.teamID,
                      "--connection-spacing-s", "0.5"]
        }
        for _ in 0..<self.workers {
            try fleet.start(["worker", "--topic", topic, "--connections", "\(self.connections)"] + sender + stateArguments)
        }

        let started = monotonicSeconds()
        let launch = try fleet.run(["launch", "--topic", topic, "--protocol", self.protocol.rawValue, "--tokens", tokenFile, "--payload", #"{"aps":{"alert":"叮咚 · Ding dong: someone is at the door","sound":"default"}}"#]
            + (self.rate.map { ["--rate", "\($0)"] } ?? []) + stateArguments)
        guard let id = UUID(uuidString: launch.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "\n").last.map(String.init) ?? "") else {
            throw CLIError("launch printed no campaign id: \(launch)")
        }
        print("launched    \(id.uuidString.lowercased()) in \(String(format: "%.1f", monotonicSeconds() - started)) s\n")

        let (record, unregisteredMarked, rings) = try await self.state.withState(logger: makeLogger("pushfleet.demo", level: .warning)) { queue, store in
            let bar = ProgressBar(total: self.tokens)
            var doorbell: DemoDoorbell? = nil
            var ringing: Task<Void, Never>? = nil
            if self.doorbell {
                let bell = try await DemoDoorbell.start(topic: topic, store: store, ledger: mock.ledger) { arguments in
                    try fleet.start(arguments + stateArguments)
                }
                ringing = bell.ringEverySecond { ring, milliseconds in
                    bar.interrupt(String(format: "ring %d: 6 phones in %.1f ms", ring, milliseconds))
                }
                doorbell = bell
            }
            var record = try await store.campaign(id)
            while let current = record, current.state != .completed {
                let report = StatusReport(record: current)
                bar.draw(done: report.settled, detail: "rejected \(current.rejected.values.reduce(0, +))  resent \(current.resent)")
                guard fleet.allRunning else { throw CLIError("a fleet process ended early:\n\(fleet.errors)") }
                try await Task.sleep(for: .milliseconds(250))
                record = try await store.campaign(id)
            }
            await doorbell?.stop(ringing)
            guard let final = record else { throw CLIError("campaign \(id) disappeared") }
            bar.draw(done: StatusReport(record: final).settled, detail: "completed")
            bar.finish()
            // The coordinator polls the feedback service every 2 s; give it a few rounds.
            var marked = 0
            for _ in 0..<20 {
                marked = try await store.countTokens(topic: topic, environment: .production, status: .unregistered)
                if marked >= audience.unregistered.count { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            return (final, marked, doorbell?.summary())
        }
        let seconds = monotonicSeconds() - started
        let report = Reconciliation(audience: audience, record: record, ledger: mock.ledger, unregisteredMarked: unregisteredMarked, seconds: seconds, http2: self.protocol == .http2)
        print(report.text)
        if let rings { print(rings.text) }
        if self.rate != nil { print(DeliveryHistogram(seconds: mock.ledger.acceptedPerSecond(), limit: self.rate).text) }
        if !report.isExact || rings?.exact == false { throw ExitCode(1) }
    }
}
