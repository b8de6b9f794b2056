import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetTestSupport
import Testing

/// `campaign list` and the exit codes of `status --watch`, against campaigns made in Postgres.
@Suite struct OperatorCommandTests {
    private func postgres() throws -> [String] { ["--postgres", try IntegrationEnvironment.postgresURL()] }

    @Test func watchExitsWithTheStateACampaignEndedIn() async throws {
        let topic = PostgresFixture.topic("watch")
        var ids: [CampaignState: UUID] = [:]
        try await PostgresFixture.withStore { (store: CampaignStore) async throws in
            for state in [CampaignState.completed, .failed, .cancelled] {
                let campaign = PostgresFixture.campaign(topic: topic)
                #expect(try await store.createCampaign(campaign))
                #expect(try await store.setState(campaign.id, to: state, from: [.pending]))
                ids[state] = campaign.id
            }
        }
        for (state, code) in [(CampaignState.completed, Int32(0)), (.failed, 2), (.cancelled, 3)] {
            let result = try await PushFleetProcess.run(["status", ids[state]!.uuidString, "--watch"] + (try self.postgres()))
            #expect(result.status == code, "\(state): \(result.error)")
            #expect(result.output.contains(state.rawValue))
        }
        // Without --watch, status reports and succeeds whatever the state.
        let plain = try await PushFleetProcess.run(["status", ids[.failed]!.uuidString] + (try self.postgres()))
        #expect(plain.status == 0)
    }

    @Test func listShowsTheNewestCampaignsOfAState() async throws {
        let topic = PostgresFixture.topic("list")
        let paused = PostgresFixture.campaign(topic: topic)
        try await PostgresFixture.withStore { (store: CampaignStore) async throws in
            #expect(try await store.createCampaign(paused))
            #expect(try await store.setState(paused.id, to: .running, from: [.pending]))
            #expect(try await store.setState(paused.id, to: .paused, from: [.running]))
        }
        let result = try await PushFleetProcess.run(["campaign", "list", "--state", "paused", "--limit", "10000", "--json"] + (try self.postgres()))
        #expect(result.status == 0, "\(result.error)")
        let list = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [[String: Any]])
        #expect(list.allSatisfy { $0["state"] as? String == "paused" })
        let mine = try #require(list.first { $0["id"] as? String == paused.id.uuidString.lowercased() })
        #expect(mine["total"] as? Int == paused.totalTokens)

        let text = try await PushFleetProcess.run(["campaign", "list", "--state", "paused", "--limit", "10000"] + (try self.postgres()))
        #expect(text.status == 0)
        #expect(text.output.split(separator: "\n").first?.hasPrefix("CAMPAIGN") == true)
        #expect(text.output.contains(paused.id.uuidString) && text.output.contains(topic))

        let wrong = try await PushFleetProcess.run(["campaign", "list", "--state", "sleeping"] + (try self.postgres()))
        #expect(wrong.status == 64)
        #expect(wrong.error.contains("not sleeping"))
    }

    /// `launch --at` takes an ISO 8601 time to come: one it cannot read is a usage error, one an
    /// hour past is refused; nothing is created either way.
    @Test func launchAtRefusesATimeItCannotReadOrOneLongPast() async throws {
        let topic = PostgresFixture.topic("launch-at")
        let file = NSTemporaryDirectory() + "pushfleet-launch-at-\(UUID().uuidString).txt"
        try PostgresFixture.tokens(3).map(\.hexString).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let launch = ["launch", "--topic", topic, "--tokens", file, "--payload", #"{"aps":{"alert":"hi"}}"#,
                      "--redis", try IntegrationEnvironment.redisURL()] + (try self.postgres())
        let unreadable = try await PushFleetProcess.run(launch + ["--at", "tomorrow at nine"])
        #expect(unreadable.status == 64)
        #expect(unreadable.error.contains("ISO 8601"), "\(unreadable.error)")
        let past = Date().addingTimeInterval(-3_600).formatted(.iso8601)
        let late = try await PushFleetProcess.run(launch + ["--at", past])
        #expect(late.status == 1)
        #expect(late.error.contains("in the past"), "\(late.error)")
        try await PostgresFixture.withStore { (store: CampaignStore) async throws in
            #expect(try await store.campaigns(in: CampaignState.allCases).allSatisfy { $0.topic != topic })
        }
    }

    /// `launch --variant` wants NAME=PAYLOAD:WEIGHT, and no --payload or --localized beside it;
    /// `status` of an id that is neither a campaign nor a split test says so.
    @Test func launchVariantRefusesWhatItCannotSplit() async throws {
        let topic = PostgresFixture.topic("launch-variant")
        let file = NSTemporaryDirectory() + "pushfleet-launch-variant-\(UUID().uuidString).txt"
        try PostgresFixture.tokens(3).map(\.hexString).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let state = ["--redis", try IntegrationEnvironment.redisURL()] + (try self.postgres())
        let base = ["launch", "--topic", topic, "--tokens", file]
        let cases: [(arguments: [String], says: String)] = [
            (["--variant", #"A={"aps":{}}"#, "--variant", #"B={"aps":{}}:1"#], "NAME=PAYLOAD:WEIGHT"),
            (["--variant", #"A={"aps":{}}:0"#, "--variant", #"B={"aps":{}}:1"#], "NAME=PAYLOAD:WEIGHT"),
            (["--payload", #"{"aps":{}}"#, "--variant", #"A={"aps":{}}:1"#, "--variant", #"B={"aps":{}}:1"#], "one of them"),
        ]
        for (arguments, says) in cases {
            let result = try await PushFleetProcess.run(base + arguments + state)
            #expect(result.status == 64, "\(arguments): \(result.error)")
            #expect(result.error.contains(says), "\(result.error)")
        }
        // Variants have a payload each: localized payloads beside them are refused.
        let localized = try await PushFleetProcess.run(
            base + ["--variant", #"A={"aps":{}}:1"#, "--variant", #"B={"aps":{}}:1"#, "--localized", #"fr={"aps":{}}"#] + state
        )
        #expect(localized.status == 64)
        #expect(localized.error.contains("--localized and --variant do not go together"), "\(localized.error)")
        let one = try await PushFleetProcess.run(base + ["--variant", #"A={"aps":{}}:1"#] + state)
        #expect(one.status == 1)
        #expect(one.error.contains("2 to 26 variants"), "\(one.error)")
        let unknown = try await PushFleetProcess.run(["status", UUID().uuidString] + (try self.postgres()))
        #expect(unknown.status == 1)
        #expect(unknown.error.contains("nor a split test"), "\(unknown.error)")
        try await PostgresFixture.withStore { (store: CampaignStore) async throws in
            #expect(try await store.campaigns(in: CampaignState.allCases).allSatisfy { $0.topic != topic })
        }
    }

    /// `campaign set-rate` changes the limit of a campaign that has not ended (`status` shows it,
    /// `none` lifts it), and refuses an ended campaign, an unknown one and a rate below 1.
    @Test func setRateChangesALiveCampaignsLimitAndRefusesTheRest() async throws {
        let topic = PostgresFixture.topic("set-rate")
        let (running, done) = (PostgresFixture.campaign(topic: topic), PostgresFixture.campaign(topic: topic))
        try await PostgresFixture.withStore { (store: CampaignStore) async throws in
            for campaign in [running, done] { #expect(try await store.createCampaign(campaign)) }
            #expect(try await store.setState(running.id, to: .running, from: [.pending]))
            #expect(try await store.setState(done.id, to: .completed, from: [.pending]))
        }
        let state = ["--redis", try IntegrationEnvironment.redisURL()] + (try self.postgres())
        func status(_ id: UUID) async throws -> [String: Any] {
            let result = try await PushFleetProcess.run(["status", id.uuidString, "--json"] + (try self.postgres()))
            return try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        }
        #expect(try await status(running.id)["rate_limit"] is NSNull)

        let set = try await PushFleetProcess.run(["campaign", "set-rate", running.id.uuidString, "250"] + state)
        #expect(set.status == 0, "\(set.error)")
        #expect(try await status(running.id)["rate_limit"] as? Int == 250)
        let text = try await PushFleetProcess.run(["status", running.id.uuidString] + (try self.postgres()))
        #expect(text.output.contains("(limit 250/s)"), "\(text.output)")

        let lifted = try await PushFleetProcess.run(["campaign", "set-rate", running.id.uuidString, "none"] + state)
        #expect(lifted.status == 0, "\(lifted.error)")
        #expect(try await status(running.id)["rate_limit"] is NSNull)

        let ended = try await PushFleetProcess.run(["campaign", "set-rate", done.id.uuidString, "10"] + state)
        #expect(ended.status == 1)
        #expect(ended.error.contains("is completed"), "\(ended.error)")
        let unknown = try await PushFleetProcess.run(["campaign", "set-rate", UUID().uuidString, "10"] + state)
        #expect(unknown.status == 1)
        #expect(unknown.error.contains("no campaign"), "\(unknown.error)")
        let zero = try await PushFleetProcess.run(["campaign", "set-rate", running.id.uuidString, "0"] + state)
        #expect(zero.status == 64)
        #expect(try await status(running.id)["rate_limit"] is NSNull)
    }
}

extension OperatorCommandTests {
    /// On a terminal (here `script`'s pseudo-terminal), reading a token file draws a progress bar
    /// that ends at 100% with every token; without one, nothing is drawn.
    @Test func tokensImportDrawsProgressOnATerminal() async throws {
        let tokens = PostgresFixture.tokens(25_000)
        let file = NSTemporaryDirectory() + "pushfleet-progress-\(UUID().uuidString).txt"
        try tokens.map(\.hexString).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let command = ([PushFleetProcess.executable, "tokens", "import", file, "--topic", PostgresFixture.topic("progress"), "--environment", "sandbox"]
            + (try self.postgres())).map { "'\($0)'" }.joined(separator: " ")
        // `script` runs the command on a pseudo-terminal and copies what it wrote to its own output.
        let script = Process()
        script.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        script.arguments = ["-qec", command, "/dev/null"]
        let pipe = Pipe()
        script.standardOutput = pipe
        script.standardInput = FileHandle.nullDevice
        try script.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        script.waitUntilExit()
        let terminal = (status: script.terminationStatus, output: output, error: "")
        #expect(terminal.status == 0, "\(terminal.output)")
        #expect(terminal.output.contains("100%  25000/25000"), "\(terminal.output)")
        #expect(terminal.output.contains("read from \(file)"))
        #expect(terminal.output.contains("imported 25000 tokens"))

        let plain = try await PushFleetProcess.run(["tokens", "import", file, "--topic", PostgresFixture.topic("progress"), "--environment", "sandbox"] + (try self.postgres()))
        #expect(plain.status == 0)
        #expect(!plain.error.contains("read from"), "a bar drawn without a terminal: \(plain.error)")
    }
}
