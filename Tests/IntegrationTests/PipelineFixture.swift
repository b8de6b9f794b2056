import APNSMockServer
import Foundation
import Logging
import NIOCore
import PushFleetCore
import PushFleetPostgres
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The whole system on loopback: the simulator in this process; Redis and Postgres from
/// `scripts/test.sh`; launch, workers, coordinator and status as real `pushfleet` processes.
struct PipelineFixture {
    let mock: BinaryFixture
    let topic: String
    var redisURL: String
    let postgresURL: String
    let tokens: [DeviceToken]
    let invalid: Set<DeviceToken>
    let unregistered: Set<DeviceToken>
    let tokenFile: String
    /// Whether `launch`, `worker` and `coordinator` get their options from `PUSHFLEET_*`
    /// variables (URLs from `PUSHFLEET_*_FILE` files) instead of the command line.
    var optionsFromEnvironment = false

    /// An audience of `count` tokens; 1 in `invalidEvery` answered InvalidToken, 1 in
    /// `unregisteredEvery` reported by the feedback service.
    ///
    /// The simulator allows `maxConcurrentStreams` streams per HTTP/2 connection: 100 unless a
    /// test is about the number. At APNs' 1,000, two workers of two connections keep 4,000
    /// requests in flight, and the debug simulator on a loaded 2-core machine answers some 500 a
    /// second: requests then wait close to the worker's 10-second request timeout, time out, and
    /// are sent again (counted, but no longer the run a test asserts "nothing re-sent" of).
    /// `manner` is how its HTTP/2 gateway treats the workers.
    static func start(
        count: Int, invalidEvery: Int? = 100, unregisteredEvery: Int? = 100,
        faults: MockAPNSConfiguration.BinaryFaults = .init(), http2Faults: MockAPNSConfiguration.HTTP2Faults = .init(),
        errorDelay: TimeAmount = .milliseconds(50), maxConcurrentStreams: Int = 100, manner: GatewayManner = .kind
    ) async throws -> PipelineFixture {
        let seed = UInt64.random(in: 1...UInt64.max)
        let tokens = TestTokens.tokens(count, seed: seed)
        let invalid = invalidEvery.map { k in Set(stride(from: k / 2, to: count, by: k).map { tokens[$0] }) } ?? []
        let unregistered = unregisteredEvery.map { k in Set(stride(from: k / 4, to: count, by: k).map { tokens[$0] }) } ?? []
        let mock = try await BinaryFixture.start(invalidTokens: invalid, unregisteredTokens: unregistered, errorDelay: errorDelay, faults: faults, http2Faults: http2Faults,
            maxConcurrentStreams: maxConcurrentStreams, manner: manner
        )
        let file = NSTemporaryDirectory() + "pushfleet-audience-\(seed).txt"
        try tokens.map(\.hexString).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return PipelineFixture(
            mock: mock, topic: "com.example.pipeline.\(String(seed, radix: 36))",
            redisURL: try IntegrationEnvironment.redisURL(), postgresURL: try IntegrationEnvironment.pipelinePostgresURL(),
            tokens: tokens, invalid: invalid, unregistered: unregistered, tokenFile: file
        )
    }

    /// The same fixture for processes that reach Redis, Postgres or both through `proxy`s playing
    /// their outages.
    func through(redis: OutageProxy? = nil, postgres: OutageProxy? = nil) -> PipelineFixture {
        func rewrite(_ url: String, _ proxy: OutageProxy?) -> String {
            guard let proxy, var components = URLComponents(string: url) else { return url }
            components.host = "127.0.0.1"
            components.port = proxy.port
            return components.string ?? url
        }
        return PipelineFixture(
            mock: self.mock, topic: self.topic, redisURL: rewrite(self.redisURL, redis), postgresURL: rewrite(self.postgresURL, postgres),
            tokens: self.tokens, invalid: self.invalid, unregistered: self.unregistered, tokenFile: self.tokenFile,
            optionsFromEnvironment: self.optionsFromEnvironment
        )
    }

    /// The same fixture on Redis database `database`, for a test that empties it (`FLUSHDB`, which
    /// is `FLUSHALL` for everything the fleet keeps) while the other suites' keys stay in theirs.
    func onRedisDatabase(_ database: Int) -> PipelineFixture {
        var components = URLComponents(string: self.redisURL)
        components?.path = "/\(database)"
        return PipelineFixture(
            mock: self.mock, topic: self.topic, redisURL: components?.string ?? self.redisURL, postgresURL: self.postgresURL,
            tokens: self.tokens, invalid: self.invalid, unregistered: self.unregistered, tokenFile: self.tokenFile,
            optionsFromEnvironment: self.optionsFromEnvironment
        )
    }

    /// The same fixture on the 3-master Redis Cluster of `scripts/test.sh`.
    func onRedisCluster() throws -> PipelineFixture {
        var copy = self
        copy.redisURL = try IntegrationEnvironment.redisClusterURL()
        return copy
    }

    /// The port of `url` (`redis://…`, `postgres://…`).
    static func port(of url: String) throws -> Int {
        try #require(URLComponents(string: url)?.port, "no port in \(url)")
    }

    func stop() async {
        await self.mock.stop()
        try? FileManager.default.removeItem(atPath: self.tokenFile)
        // The URL files of ``invocation(_:)``.
        let directory = (self.tokenFile as NSString).deletingLastPathComponent
        let prefix = (self.tokenFile as NSString).lastPathComponent + ".pushfleet_"
        for file in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where file.hasPrefix(prefix) {
            try? FileManager.default.removeItem(atPath: directory + "/" + file)
        }
    }

    var stateArguments: [String] { ["--redis", self.redisURL, "--postgres", self.postgresURL] }

    var tlsArguments: [String] {
        let certificates = self.mock.certificates
        return ["--ca", certificates.caCertificate, "--cert", certificates.clientCertificate, "--key", certificates.clientKey]
    }

    /// Runs `pushfleet launch` of the fixture's audience (or of the audience file `audience`) and
    /// returns the campaign id.
    func launch(_ extra: [String] = [], protocol: String = "binary", audience: String? = nil) async throws -> UUID {
        let (arguments, environment) = try self.invocation(
            ["launch", "--topic", self.topic, "--protocol", `protocol`, "--tokens", audience ?? self.tokenFile]
                // A split test's variants bring their payloads, and a test may bring its own.
                + (extra.contains("--variant") || extra.contains("--payload") ? [] : ["--payload", #"{"aps":{"alert":"叮咚 Ding dong","sound":"default"}}"#])
                + extra + self.stateArguments
        )
        let result = try await PushFleetProcess.run(arguments, environment: environment)
        try #require(result.status == 0, "launch failed: \(result.error)")
        return try #require(UUID(uuidString: result.output.split(separator: "\n").last.map(String.init) ?? ""), "launch printed \(result.output)")
    }

    /// Starts a worker against the fixture's simulator, or against `gateway`, or on `port` of
    /// loopback; `tls` replaces the fixture's ``tlsArguments``.
    func startWorker(
        connections: Int = 4, shardsPerConnection: Int = 4, leaseMilliseconds: Int = 3_000, gateway: BinaryFixture? = nil, port: Int? = nil,
        tls: [String]? = nil, extra: [String] = []
    ) throws -> PushFleetProcess {
        try self.spawn(
            ["worker", "--topic", self.topic, "--protocol", "binary", "--endpoint", "127.0.0.1:\(port ?? (gateway ?? self.mock).binaryPort)",
             "--connections", "\(connections)",
             "--shards-per-connection", "\(shardsPerConnection)", "--lease-ms", "\(leaseMilliseconds)"] + extra + (tls ?? self.tlsArguments)
                + self.stateArguments
        )
    }

    enum HTTP2Authentication { case providerToken, certificate }

    /// Starts an HTTP/2 worker against the fixture's simulator, or on `port` of loopback; with
    /// certificate authentication `tls` replaces the fixture's ``tlsArguments``.
    func startHTTP2Worker(
        _ authentication: HTTP2Authentication, connections: Int = 2, teamID: String = BinaryFixture.teamID, port: Int? = nil,
        tls: [String]? = nil, extra: [String] = []
    ) throws -> PushFleetProcess {
        let certificates = self.mock.certificates
        let credentials: [String]
        switch authentication {
        case .providerToken:
            credentials = ["--ca", certificates.caCertificate, "--auth-key", certificates.authKey,
                           "--key-id", BinaryFixture.keyID, "--team-id", teamID]
        case .certificate:
            credentials = tls ?? self.tlsArguments
        }
        return try self.spawn(
            ["worker", "--topic", self.topic, "--endpoint", "127.0.0.1:\(port ?? self.mock.ports.http2!)", "--connections", "\(connections)",
             "--connection-spacing-s", "0.2", "--lease-ms", "3000"] + extra + credentials + self.stateArguments
        )
    }

    /// Starts a worker of `protocol` (`binary`, or `http2` with provider-token auth) with its defaults here.
    func startWorker(protocol: String, extra: [String] = []) throws -> PushFleetProcess {
        `protocol` == "http2" ? try self.startHTTP2Worker(.providerToken, extra: extra) : try self.startWorker(extra: extra)
    }

    func startCoordinator(_ extra: [String] = []) throws -> PushFleetProcess {
        try self.spawn(
            ["coordinator", "--interval-ms", "200", "--feedback-endpoint", "127.0.0.1:\(self.mock.ports.feedback!)",
             "--feedback-topic", self.topic, "--feedback-interval-s", "1"] + extra + self.tlsArguments + self.stateArguments
        )
    }

    /// The same fixture, giving options through the environment or not.
    func withOptions(fromEnvironment: Bool) -> PipelineFixture {
        var copy = self
        copy.optionsFromEnvironment = fromEnvironment
        return copy
    }

    /// Starts `pushfleet arguments…`, its options given as ``optionsFromEnvironment`` says.
    func spawn(_ arguments: [String]) throws -> PushFleetProcess {
        let (arguments, environment) = try self.invocation(arguments)
        return try PushFleetProcess(arguments, environment: environment)
    }

    /// `arguments` as given (the command line), or as the environment gives them: the command's
    /// words stay, `--name value` becomes `PUSHFLEET_NAME=value` (Redis and Postgres URLs in files
    /// named by `PUSHFLEET_REDIS_FILE`, `PUSHFLEET_POSTGRES_FILE`), a bare `--flag` `PUSHFLEET_FLAG=true`.
    func invocation(_ arguments: [String]) throws -> (arguments: [String], environment: [String: String]) {
        guard self.optionsFromEnvironment else { return (arguments, [:]) }
        var words: [String] = []
        var environment: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else {
                words.append(argument)
                index += 1
                continue
            }
            let name = "PUSHFLEET_" + argument.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
            if index + 1 < arguments.count, !arguments[index + 1].hasPrefix("--") {
                let value = arguments[index + 1]
                if name == "PUSHFLEET_REDIS" || name == "PUSHFLEET_POSTGRES" {
                    // Beside the fixture's token file, one per URL (a copy of the fixture on
                    // another Redis or Postgres has its own), removed with it by ``stop()``.
                    let file = self.tokenFile + ".\(name.lowercased()).\(UInt(bitPattern: value.hashValue))"
                    try value.write(toFile: file, atomically: true, encoding: .utf8)
                    environment[name + "_FILE"] = file
                } else {
                    environment[name] = value
                }
                index += 2
            } else {
                environment[name] = "true"
                index += 1
            }
        }
        return (words, environment)
    }

    /// `pushfleet status ID --json`, parsed.
    func status(_ id: UUID) async throws -> [String: Any] {
        let result = try await PushFleetProcess.run(["status", id.uuidString, "--json"] + self.stateArguments)
        try #require(result.status == 0, "status failed: \(result.error)")
        let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
        return try #require(object)
    }

    /// Polls the status until `done` holds. The limit only keeps a broken run from hanging CI.
    func waitForStatus(_ id: UUID, limit: Duration = .seconds(600), until done: ([String: Any]) -> Bool) async throws -> [String: Any] {
        let start = ContinuousClock.now
        while true {
            let status = try await self.status(id)
            if done(status) { return status }
            if ContinuousClock.now - start > limit {
                Issue.record("campaign \(id) did not get there within \(limit): \(status)")
                return status
            }
            try await Task.sleep(for: .milliseconds(300))
        }
    }

    func waitForCompletion(_ id: UUID, limit: Duration = .seconds(600)) async throws -> [String: Any] {
        try await self.waitForStatus(id, limit: limit) { $0["state"] as? String == "completed" }
    }

    /// Checks the ledger and the final status: every valid token delivered, none of the invalid ones,
    /// at most `duplicatesAllowed` duplicates, and the counts reconcile.
    ///
    /// Over HTTP/2 invalid tokens are answered `BadDeviceToken` and unregistered ones `410
    /// Unregistered` (never delivered); over the binary protocol unregistered tokens are accepted
    /// and reported later by the feedback service.
    func expectReconciled(_ status: [String: Any], duplicatesAllowed: Int, http2: Bool = false) {
        let undeliverable = self.undeliverable(http2: http2)
        let valid = self.tokens.count - undeliverable.count
        var rejected: [String: Int] = [:]
        if !self.invalid.isEmpty { rejected[http2 ? "BadDeviceToken" : "InvalidToken"] = self.invalid.count }
        if http2 && !self.unregistered.isEmpty { rejected["Unregistered"] = self.unregistered.count }
        #expect(status["total"] as? Int == self.tokens.count)
        #expect(status["accepted"] as? Int == valid)
        #expect(status["rejected"] as? [String: Int] == rejected)
        #expect(status["pending"] as? Int == 0)
        let lost = self.tokens.count { !undeliverable.contains($0) && self.mock.ledger.deliveries(of: $0) == 0 }
        let delivered = self.tokens.count { undeliverable.contains($0) && self.mock.ledger.deliveries(of: $0) > 0 }
        #expect(lost == 0, "valid tokens never delivered")
        #expect(delivered == 0, "invalid tokens delivered")
        let duplicates = self.mock.ledger.snapshot().duplicateDeliveries
        #expect(duplicates <= duplicatesAllowed, "duplicate deliveries")
    }

    /// The tokens the simulator never accepts: the invalid ones, and over HTTP/2 the unregistered
    /// ones too (over binary those are accepted, and the feedback service lists them later).
    func undeliverable(http2: Bool) -> Set<DeviceToken> {
        http2 ? self.invalid.union(self.unregistered) : self.invalid
    }

    /// Registers the audience's stale tokens but `excepted` an hour ago: the coordinator marks the
    /// rejected tokens the registry holds, and only those.
    func registerStaleTokens(except excepted: Set<DeviceToken> = []) async throws {
        let held = self.invalid.union(self.unregistered).subtracting(excepted)
        _ = try await self.withStore { store in
            try await store.importTokens(Array(held), topic: self.topic, environment: .production, registeredAt: Date() - 3_600)
        }
    }

    /// A store for checking the registry, run for the duration of `body`.
    func withStore<T: Sendable>(_ body: (CampaignStore) async throws -> T) async throws -> T {
        let store = CampaignStore(configuration: try PostgresConfiguration(url: self.postgresURL), logger: quietLogger)
        let running = Task { await store.run() }
        defer { running.cancel() }
        return try await body(store)
    }
}

/// Stops `processes` with SIGTERM and waits for each. One still running 60 s later is a failure
/// (a drain must end): it is recorded with the end of its log, and killed, so a stuck process
/// fails the test instead of hanging the suite.
func stopAll(_ processes: [PushFleetProcess]) async {
    for process in processes { process.signal(SIGTERM) }
    let deadline = ContinuousClock.now + .seconds(60)
    for process in processes {
        while process.isRunning && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(100)) }
        if process.isRunning {
            Issue.record("`pushfleet \(process.arguments.prefix(1).joined())` did not exit within 60 s of SIGTERM; its log ends:\n\(process.standardError.suffix(4_000))")
            process.signal(SIGKILL)
        }
        await process.wait()
    }
}
