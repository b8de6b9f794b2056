import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetAPI
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `--metrics-port` on a worker and a coordinator, scraped over HTTP during a real campaign.
extension PipelineTests {
    /// The counters agree with `status --json` at the end, the coordinator's gauges show the work
    /// pending before any worker runs and none after, and the worker's `/readyz` follows Redis.
    /// Over HTTP/2, `launch`, `coordinator` and `worker` take every option from `PUSHFLEET_*`
    /// variables (the URLs from `_FILE` files); over binary, from the command line.
    @Test(arguments: ["http2", "binary"])
    func metricsAgreeWithStatusAndReadinessFollowsRedis(_ protocol: String) async throws {
        let fixture = try await PipelineFixture.start(count: 20_000).withOptions(fromEnvironment: `protocol` == "http2")
        defer { Task { await fixture.stop() } }
        let redisProxy = try await OutageProxy.start(port: try PipelineFixture.port(of: fixture.redisURL))
        defer { Task { await redisProxy.stop() } }
        let coordinatorPort = try FreePort.take()
        let workerPort = try FreePort.take()
        let coordinator = try fixture.startCoordinator(["--metrics-port", "\(coordinatorPort)", "--metrics-host", "127.0.0.1"])
        _ = try await PrometheusText.waitFor("/readyz", port: coordinatorPort, status: 200)
        let id = try await fixture.launch(protocol: `protocol`)
        _ = try await fixture.waitForStatus(id) { $0["state"] as? String == "running" }

        // No worker yet: every token is pending, and the coordinator says so per topic.
        let topic = ["topic": fixture.topic, "environment": "production"]
        var before = try await PrometheusText.scrape(port: coordinatorPort)
        for _ in 0..<600 where before.value("pushfleet_coordinator_leader") != 1 {
            try await Task.sleep(for: .milliseconds(200))
            before = try await PrometheusText.scrape(port: coordinatorPort)
        }
        #expect(before.value("pushfleet_coordinator_leader") == 1)
        #expect(before.value("pushfleet_pending_tokens", topic) == Double(fixture.tokens.count))
        #expect((before.value("pushfleet_campaigns", ["state": "running"]) ?? 0) >= 1)
        // And so does the Redis list an autoscaler's LLEN reads: one element per unfinished shard.
        let queue = CampaignQueue(client: RedisClient(configuration: try RedisConfiguration(url: fixture.redisURL)))
        let shards = try #require(try await fixture.withStore { try await $0.campaign(id) }?.shardCount)
        var backlog = 0
        for _ in 0..<600 where backlog != shards {
            backlog = try await queue.backlog(topic: fixture.topic, environment: .production)
            if backlog != shards { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(backlog == shards)

        // The worker reaches Redis through a proxy that can play an outage.
        let worker = try fixture.through(redis: redisProxy).startWorker(
            protocol: `protocol`, extra: ["--metrics-port", "\(workerPort)", "--metrics-host", "127.0.0.1"]
        )
        let status = try await fixture.waitForCompletion(id)
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: resent, http2: `protocol` == "http2")

        // What the worker counted is what Postgres holds (each re-send may count twice there).
        let scraped = try await PrometheusText.scrape(port: workerPort)
        let accepted = try #require(status["accepted"] as? Int)
        let counted = scraped.value("pushfleet_notifications_total", ["outcome": "accepted", "reason": ""]) ?? 0
        #expect(counted >= Double(accepted) && counted <= Double(accepted + resent), "worker counted \(counted) accepted, status says \(accepted)")
        let rejected = try #require(status["rejected"] as? [String: Int])
        #expect(!rejected.isEmpty)
        for (reason, count) in rejected {
            let counted = scraped.value("pushfleet_notifications_total", ["outcome": "rejected", "reason": reason]) ?? 0
            #expect(counted >= Double(count) && counted <= Double(count + resent), "\(reason): worker counted \(counted), status says \(count)")
        }
        #expect(scraped.sum("pushfleet_shard_runs_ended_total", matching: ["ending": "completed"]) >= 1)
        #expect(scraped.sum("pushfleet_shards_claimed_total") >= scraped.sum("pushfleet_shard_runs_ended_total"))
        // The checkpoint timer is exported (what it measured is for scripts/bench.sh, not a test).
        #expect(scraped.value("pushfleet_checkpoint_duration_seconds_count") != nil)
        #expect((scraped.value("pushfleet_apns_connections", ["protocol": `protocol`]) ?? -1) >= 0)
        if `protocol` == "http2" {
            // The pool stays open between campaigns.
            #expect((scraped.value("pushfleet_apns_connections", ["protocol": "http2"]) ?? 0) >= 1)
            // Every answer is timed, whatever its status.
            let answers = scraped.sum("pushfleet_apns_answers_total")
            #expect(answers >= Double(fixture.tokens.count))
            #expect(scraped.value("pushfleet_apns_answer_duration_seconds_count") == answers)
            #expect((scraped.value("pushfleet_apns_provider_tokens_signed_total") ?? 0) >= 1)
        } else {
            #expect(scraped.sum("pushfleet_apns_binary_error_responses_total", matching: ["status": "8"]) >= Double(fixture.invalid.count))
        }

        // Completed: nothing pending for the topic.
        let after = try await PrometheusText.scrape(port: coordinatorPort)
        #expect(after.value("pushfleet_pending_tokens", topic) == 0)
        #expect((after.value("pushfleet_campaigns", ["state": "completed"]) ?? 0) >= 1)
        for _ in 0..<600 where backlog != 0 {
            backlog = try await queue.backlog(topic: fixture.topic, environment: .production)
            if backlog != 0 { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(backlog == 0, "the backlog list outlived its campaign")
        try await queue.client.shutdown()

        // Redis gone: the worker is alive but not ready, and says why; back: ready again.
        #expect(try await PrometheusText.get("/healthz", port: workerPort).status == 200)
        _ = try await PrometheusText.waitFor("/readyz", port: workerPort, status: 200)
        redisProxy.cut()
        let unready = try await PrometheusText.waitFor("/readyz", port: workerPort, status: 503)
        #expect(unready.contains("\"ready\":false") && unready.contains("\"redis\""), "\(unready)")
        #expect(try await PrometheusText.get("/healthz", port: workerPort).status == 200)
        redisProxy.restore()
        _ = try await PrometheusText.waitFor("/readyz", port: workerPort, status: 200)

        await stopAll([worker, coordinator])
        #expect(await worker.wait() == 0)
    }

    /// The simulator's own page: its ledger as gauges. Its options come from the environment.
    @Test func simulatorServesItsLedgerAsMetrics() async throws {
        let fixture = try await PipelineFixture.start(count: 1_000)
        defer { Task { await fixture.stop() } }
        let port = try FreePort.take()
        // Its options from the environment.
        let simulator = try PushFleetProcess(
            ["mock-apns"],
            environment: [
                "PUSHFLEET_CERTS": fixture.mock.certificates.directory, "PUSHFLEET_BINARY_PORT": "0", "PUSHFLEET_FEEDBACK_PORT": "0",
                "PUSHFLEET_ADMIN_PORT": "0", "PUSHFLEET_HTTP2_PORT": "0", "PUSHFLEET_METRICS_PORT": "\(port)", "PUSHFLEET_METRICS_HOST": "127.0.0.1",
                "PUSHFLEET_LOG_LEVEL": "info", "PUSHFLEET_LOG_FORMAT": "json",
            ]
        )
        _ = try await PrometheusText.waitFor("/healthz", port: port, status: 200)
        let empty = try await PrometheusText.scrape(port: port)
        #expect(empty.value("pushfleet_mock_apns_notifications", ["outcome": "accepted", "reason": ""]) == 0)

        // Its ports, from the line it prints once listening.
        var binaryPort: Int?
        for _ in 0..<600 where binaryPort == nil {
            binaryPort = simulator.standardOutput.split(separator: " ").first { $0.hasPrefix("binary=") }.flatMap { Int($0.dropFirst("binary=".count)) }
            if binaryPort == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let gateway = try #require(binaryPort, "mock-apns printed no ports: \(simulator.standardOutput) \(simulator.standardError)")
        let sent = try await PushFleetProcess.run(
            ["send", "--tokens", fixture.tokenFile, "--payload", #"{"aps":{"alert":"hi"}}"#, "--endpoint", "127.0.0.1:\(gateway)"] + fixture.tlsArguments
        )
        try #require(sent.status == 0, "send failed: \(sent.error)")
        let scraped = try await PrometheusText.scrape(port: port)
        #expect(scraped.value("pushfleet_mock_apns_notifications", ["outcome": "accepted", "reason": ""]) == Double(fixture.tokens.count))
        #expect(scraped.value("pushfleet_mock_apns_distinct_tokens") == Double(fixture.tokens.count))
        #expect((scraped.value("pushfleet_mock_apns_connections_accepted", ["protocol": "binary"]) ?? 0) >= 1)
        #expect(try await PrometheusText.get("/readyz", port: port).status == 200)
        #expect(try await PrometheusText.get("/nothing", port: port).status == 404)

        // Logs are JSON lines, at the level asked for.
        let lines = simulator.standardError.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        let listening = lines.first { $0["message"] as? String == "metrics and health listening" }
        #expect(listening?["level"] as? String == "info", "\(simulator.standardError)")
        #expect(listening?["label"] as? String == "pushfleet.mock-apns")
        #expect((listening?["time"] as? String)?.hasSuffix("Z") == true, "a time without its zone: \(listening?["time"] ?? "none")")
        #expect((listening?["metadata"] as? [String: Any])?["address"] as? String == "127.0.0.1:\(port)")
        await stopAll([simulator])
    }
}
