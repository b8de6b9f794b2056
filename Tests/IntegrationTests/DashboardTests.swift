import Dispatch
import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// The dashboard in a real browser: Debian's `chromium`, headless, loads `pushfleet api`'s page
/// while a running campaign's counts rise in Postgres (as the coordinator's folds raise them),
/// and the DOM it leaves shows the campaign's progress, a rate measured between two of its own
/// readings (so the page redrew with numbers that moved), the rejections and the worker alive.
@Suite struct DashboardTests {
    static func chromium() throws -> String {
        let candidates = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        return try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0) }, "chromium is not installed: run the tests through scripts/test.sh")
    }

    /// Postgres' own `psql`, from the server's installation.
    static func psql() throws -> String {
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        let candidates = versions.sorted().reversed().map { "/usr/lib/postgresql/\($0)/bin/psql" } + ["/usr/bin/psql"]
        return try #require(candidates.first { FileManager.default.isExecutableFile(atPath: $0) }, "psql is not installed")
    }

    /// The DOM after the page ran for `budget` ms of the browser's virtual time.
    static func dumpDOM(_ url: String, budget: Int) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try Self.chromium())
        let profile = NSTemporaryDirectory() + "pushfleet-chromium-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: profile) }
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--user-data-dir=\(profile)",
            "--virtual-time-budget=\(budget)", "--dump-dom", url,
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Read while it runs (a DOM larger than the pipe's buffer would block it otherwise), on a
        // thread of Dispatch's: blocking the test pool's few threads would starve the tasks that
        // the page is meant to watch.
        let data: Data = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                let data = output.fileHandleForReading.readDataToEndOfFile()
                process.waitUntilExit()
                continuation.resume(returning: data)
            }
        }
        try #require(process.terminationStatus == 0, "chromium exited with \(process.terminationStatus)")
        return String(decoding: data, as: UTF8.self)
    }

    /// The value of `attribute` on the first element that carries `marker`, after `start` if given.
    static func attribute(_ attribute: String, near marker: String, after start: String? = nil, in dom: String) -> String? {
        let from = start.flatMap { dom.range(of: $0)?.upperBound } ?? dom.startIndex
        guard let at = dom.range(of: marker, range: from..<dom.endIndex) else { return nil }
        let tagStart = dom[..<at.lowerBound].lastIndex(of: "<") ?? dom.startIndex
        let tagEnd = dom[at.upperBound...].firstIndex(of: ">") ?? dom.endIndex
        let tag = dom[tagStart..<tagEnd]
        guard let found = tag.range(of: "\(attribute)=\"") else { return nil }
        return String(tag[found.upperBound...].prefix { $0 != "\"" })
    }

    @Test func thePageShowsARunningCampaignMoving() async throws {
        let server = try await APITests.Server.start()
        let client = RedisClient(configuration: try RedisConfiguration(url: try IntegrationEnvironment.redisURL()))
        let queue = CampaignQueue(client: client)
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("dashboard")
            let campaign = PostgresFixture.campaign(topic: topic, shards: 100, perShard: 1_000)
            #expect(try await store.createCampaign(campaign))
            #expect(try await store.setState(campaign.id, to: .running, from: [.pending]))
            let worker = "dashboard-worker-\(UUID().uuidString.prefix(8))"
            try await queue.reportAlive(worker: worker, topic: topic, environment: .production)

            // A first fold, then counts that rise as folds raise them until the browser is done:
            // in a process of its own (psql in a loop), which no busy test thread can hold up.
            #expect(
                try await store.apply(
                    ProgressUpdate(campaign: campaign.id, accepted: 500, rejected: ["BadDeviceToken": 1], resent: 0, doneShards: 0, lastEventID: "1-0")
                )
            )
            let folding = Process()
            folding.executableURL = URL(fileURLWithPath: "/bin/sh")
            // The worker says it is alive as a worker does (a loaded run of chromium outlasts the
            // 10-second window of one report).
            folding.arguments = [
                "-c",
                #"while :; do "$0" -qX "$1" -c "UPDATE campaigns SET accepted = accepted + 500 WHERE campaign_id = '$2'" || exit 1; "#
                    + #"redis-cli -u "$3" ZADD pf:workers "$(date +%s%3N)" "$4" >/dev/null || exit 1; sleep 0.05; done"#,
                try Self.psql(), try IntegrationEnvironment.postgresURL(), campaign.id.uuidString.lowercased(),
                try IntegrationEnvironment.redisURL(), "\(worker)|\(topic)|production",
            ]
            folding.standardError = FileHandle.nullDevice
            try folding.run()
            // 300 readings in the browser's virtual time: in real time they span well over the
            // server's quarter-second cache, so some of them see the counts move.
            let dom = try await Self.dumpDOM("http://127.0.0.1:\(server.port)/?refresh_ms=100", budget: 30_000)
            #expect(folding.isRunning, "the psql and redis-cli loop failed")
            folding.terminate()
            folding.waitUntilExit()

            let marker = "data-campaign=\"\(campaign.id.uuidString.lowercased())\""
            #expect(dom.contains(marker), "the campaign is not on the page: \(dom.prefix(3_000))")
            #expect(dom.contains("class=\"state-running\""))
            let settled = Int(Self.attribute("data-settled", near: marker, in: dom) ?? "") ?? 0
            #expect(settled > 0, "the page shows no progress")
            #expect(dom.contains("/ 100,000 ("), "no progress counts")
            #expect(dom.contains("BadDeviceToken"), "rejections by reason are missing")
            let live = Int(Self.attribute("data-rate", near: "class=\"small num live-rate\"", after: marker, in: dom) ?? "") ?? 0
            #expect(live > 0, "the rate over the page's readings is 0: it did not redraw with moving numbers")
            #expect(dom.contains(worker), "the worker alive is not listed")
            #expect(dom.contains("<div id=\"status\" class=\"\">updated "), "the last reading failed: \(dom.prefix(1_500))")
        }
        try? await client.shutdown()
        await server.stop()
    }
}
