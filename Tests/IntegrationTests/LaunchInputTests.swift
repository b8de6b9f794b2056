import Foundation
import PushFleetCore
import PushFleetTestSupport
import Testing

/// Bad input gets a clear message, a non-zero exit, and creates nothing.
@Suite final class LaunchInputTests {
    let redis = (try? IntegrationEnvironment.redisURL()) ?? "redis://127.0.0.1:6379"
    let postgres = (try? IntegrationEnvironment.postgresURL()) ?? "postgres://postgres@127.0.0.1:5432/pushfleet"
    let payload = #"{"aps":{"alert":"hi"}}"#
    /// The files this test wrote: each test has an instance of its own, which removes them when
    /// the test ends.
    private var files: [String] = []

    deinit {
        for file in self.files { try? FileManager.default.removeItem(atPath: file) }
    }

    private func writeFile(_ lines: [String]) throws -> String {
        let path = NSTemporaryDirectory() + "pushfleet-input-\(UUID().uuidString).txt"
        try lines.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        self.files.append(path)
        return path
    }

    private func launch(_ arguments: [String]) async throws -> (status: Int32, output: String, error: String) {
        try await PushFleetProcess.run(["launch", "--topic", "com.example.input", "--redis", self.redis, "--postgres", self.postgres] + arguments)
    }

    /// `status` of a campaign that must not exist.
    private func expectNoCampaign(_ id: UUID) async throws {
        let status = try await PushFleetProcess.run(["status", id.uuidString, "--redis", self.redis, "--postgres", self.postgres])
        #expect(status.status != 0)
        #expect(status.error.contains("no campaign \(id.uuidString)"))
    }

    @Test func malformedTokenLineNamesFileAndLine() async throws {
        let good = TestTokens.token(1).hexString
        let file = try self.writeFile(["# audience", good, "", "c9d4c07c fbbc26d6 zz", good])
        let id = UUID()
        let result = try await self.launch(["--tokens", file, "--payload", self.payload, "--campaign-id", id.uuidString])
        #expect(result.status != 0)
        #expect(result.error.contains("\(file):4:"), "names the file and line: \(result.error)")
        #expect(result.error.contains("'z' at column 19"), "says why: \(result.error)")
        try await self.expectNoCampaign(id)
    }

    @Test func shortTokenForTheBinaryProtocolNamesFileAndLine() async throws {
        let file = try self.writeFile([TestTokens.token(1).hexString, "abcd"])
        let id = UUID()
        let result = try await self.launch(["--tokens", file, "--payload", self.payload, "--protocol", "binary", "--campaign-id", id.uuidString])
        #expect(result.status != 0)
        #expect(result.error.contains("\(file):2:"))
        #expect(result.error.contains("2 bytes"))
        try await self.expectNoCampaign(id)
    }

    @Test func oversizedPayloadForTheBinaryProtocolSaysByHowMuch() async throws {
        let file = try self.writeFile([TestTokens.token(1).hexString])
        // {"aps":{"alert":"xxx…"}} of exactly 3,000 bytes.
        let big = #"{"aps":{"alert":""# + String(repeating: "x", count: 3_000 - 20) + #""}}"#
        let id = UUID()
        let result = try await self.launch(["--tokens", file, "--payload", big, "--protocol", "binary", "--campaign-id", id.uuidString])
        #expect(result.status != 0)
        #expect(result.error.contains("3000 bytes"), "\(result.error)")
        #expect(result.error.contains("952 bytes over the 2048-byte limit"), "\(result.error)")
        try await self.expectNoCampaign(id)
    }

    /// An audience with fields (CSV or JSON lines): a bad line of it is named by file and line, a
    /// recipient `--local-time` cannot place fails the launch, and nothing of a launch in parts is
    /// created then.
    @Test func badAudienceFieldsNameFileAndLineAndCreateNothing() async throws {
        let (a, b) = (TestTokens.token(1).hexString, TestTokens.token(2).hexString)
        let cases: [(lines: [String], options: [String], message: String)] = [
            (["token,locale,time_zone", "\(a),fr,Europe/Paris", "\(b),fr,Mars/Olympus"], ["--local-time", "09:00"],
             ":3: unknown time zone \"Mars/Olympus\""),
            (["token,time_zone", "\(a),", "\(b),UTC"], ["--local-time", "09:00"], ":2: no time zone for this recipient"),
            (["#jsonl", #"{"token":"\#(a)","time_zone":"UTC"}"#, #"{"token":"\#(b)","time_zone":7}"#], ["--local-time", "09:00"],
             ":3: unknown time zone \"7\""),
            (["id,locale", "\(a),fr"], ["--local-time", "09:00", "--default-zone", "UTC"], ":1: a CSV audience starts with a header line"),
            (["token,locale", "\(a),\"fr"], ["--localized", "fr=\(self.payload)"], ":2: the quote at column"),
            // A spreadsheet's byte-order mark is read past; a column the launch reads must be there.
            (["\u{FEFF}token,lang", "\(a),fr"], ["--localized", "fr=\(self.payload)"], ":1: the header names no column \"locale\""),
        ]
        for (lines, options, message) in cases {
            let file = try self.writeFile(lines)
            let id = UUID()
            let result = try await self.launch(["--tokens", file, "--payload", self.payload, "--campaign-id", id.uuidString] + options)
            #expect(result.status != 0)
            #expect(result.error.contains(file + message), "\(result.error)")
            try await self.expectNoCampaign(id)
        }
        let file = try self.writeFile([a])
        let missing = try await self.launch(["--tokens", file, "--localized", "fr=\(self.payload)"])
        #expect(missing.status != 0)
        #expect(missing.error.contains("--localized needs --payload too"), "\(missing.error)")
        let clash = try await self.launch(["--tokens", file, "--payload", self.payload, "--local-time", "9:00"])
        #expect(clash.error.contains("--local-time is HH:MM"), "\(clash.error)")
        let reserved = try await self.launch(["--tokens", file, "--payload", self.payload, "--localized", "Default=\(self.payload)"])
        #expect(reserved.status != 0)
        #expect(reserved.error.contains("cannot name the locale"), "\(reserved.error)")
    }

    /// A JSON-lines audience launches as a token file does: its tokens, its duplicates dropped.
    /// A payload template's renderings are checked at launch: the recipient whose payload would be
    /// too large is named with its file, its line and the byte count, and nothing is created. An
    /// audience without the template's fields is refused before any line is sent, and so are a
    /// bad placeholder and a template for the registry.
    @Test func aPersonalizedPayloadTooLargeForOneRecipientNamesItsLine() async throws {
        let template = #"{"aps":{"alert":"Hi {{first_name|there}}, {{offer}}"}}"#
        // 2,048 bytes for the binary protocol: {"aps":{"alert":"Hi Ann, "}} is 28 bytes, and an
        // empty first name takes the fallback.
        let fits = String(repeating: "x", count: 2_048 - 28)
        let file = try self.writeFile([
            "token,first_name,offer",
            "\(TestTokens.token(1).hexString),Ann,",
            "\(TestTokens.token(2).hexString),,\"10% off, today\"",
            "\(TestTokens.token(3).hexString),Ann,\(fits)",
            "\(TestTokens.token(4).hexString),Ann,\(fits)x",
        ])
        defer { try? FileManager.default.removeItem(atPath: file) }
        let id = UUID()
        let result = try await self.launch(["--tokens", file, "--payload", template, "--protocol", "binary", "--campaign-id", id.uuidString])
        #expect(result.status != 0)
        #expect(result.error.contains("\(file):5: the payload rendered for this recipient is 2049 bytes, 1 over the 2048-byte limit"), "\(result.error)")
        try await self.expectNoCampaign(id)

        let noColumn = try self.writeFile(["token,first_name", "\(TestTokens.token(1).hexString),Ann"])
        let plain = try self.writeFile([TestTokens.token(1).hexString])
        defer { for path in [noColumn, plain] { try? FileManager.default.removeItem(atPath: path) } }
        let missing = try await self.launch(["--tokens", noColumn, "--payload", template, "--campaign-id", id.uuidString])
        #expect(missing.status != 0)
        #expect(missing.error.contains("\(noColumn):1:") && missing.error.contains("no column \"offer\""), "\(missing.error)")
        let fieldless = try await self.launch(["--tokens", plain, "--payload", template, "--campaign-id", id.uuidString])
        #expect(fieldless.status != 0)
        #expect(fieldless.error.contains("the audience has no fields"), "\(fieldless.error)")
        let unclosed = try await self.launch(["--tokens", file, "--payload", #"{"aps":{"alert":"Hi {{first_name"}}"#, "--campaign-id", id.uuidString])
        #expect(unclosed.status != 0)
        #expect(unclosed.error.contains("not closed with }}"), "\(unclosed.error)")
        let registry = try await self.launch(["--from-registry", "--payload", template, "--campaign-id", id.uuidString])
        #expect(registry.status != 0)
        #expect(registry.error.contains("give --tokens"), "\(registry.error)")
        try await self.expectNoCampaign(id)
    }

    @Test func aJSONLinesAudienceLaunchesItsTokens() async throws {
        let tokens = (1...5).map { TestTokens.token($0).hexString }
        let file = try self.writeFile(tokens.map { #"{"token":"\#($0)","first_name":"Zoë"}"# } + [#"{"token":"\#(tokens[0])"}"#])
        let result = try await self.launch(["--tokens", file, "--payload", self.payload, "--json"])
        #expect(result.status == 0, "\(result.error)")
        let created = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any])
        #expect(created["total"] as? Int == 5)
        #expect(created["duplicates_dropped"] as? Int == 1)
    }

    @Test func invalidJSONSaysWhere() async throws {
        let file = try self.writeFile([TestTokens.token(1).hexString])
        let id = UUID()
        let result = try await self.launch(["--tokens", file, "--payload", #"{"aps":{"alert":"hi",}}"#, "--campaign-id", id.uuidString])
        #expect(result.status != 0)
        #expect(result.error.contains("not valid JSON"))
        #expect(result.error.contains("line 1, column 22"), "\(result.error)")
        try await self.expectNoCampaign(id)
    }

    @Test(arguments: [
        ("voip", "com.example.input", "push type voip goes to the topic <bundle ID>.voip, not com.example.input"),
        ("alert", "com.example.input.voip", "the topic com.example.input.voip is for push type voip, not alert"),
        ("fax", "com.example.input", "--push-type fax is not one of alert, background,"),
    ])
    func pushTypeThatDoesNotFitTheTopicIsRefused(_ pushType: String, _ topic: String, _ message: String) async throws {
        let file = try self.writeFile([TestTokens.token(1).hexString])
        let id = UUID()
        let result = try await PushFleetProcess.run([
            "launch", "--topic", topic, "--push-type", pushType, "--tokens", file, "--payload", self.payload, "--campaign-id", id.uuidString,
            "--redis", self.redis, "--postgres", self.postgres,
        ])
        #expect(result.status != 0)
        #expect(result.error.contains(message), "\(result.error)")
        try await self.expectNoCampaign(id)
    }

    @Test func unknownCampaignIdIsAnError() async throws {
        try await self.expectNoCampaign(UUID())
        let pause = try await PushFleetProcess.run(["campaign", "pause", UUID().uuidString, "--redis", self.redis, "--postgres", self.postgres])
        #expect(pause.status != 0)
        #expect(pause.error.contains("no campaign"))
    }

    @Test func unreachableRedisNamesHostAndPort() async throws {
        let file = try self.writeFile([TestTokens.token(1).hexString])
        let result = try await PushFleetProcess.run(
            ["launch", "--topic", "com.example.input", "--tokens", file, "--payload", self.payload, "--redis", "redis://127.0.0.1:1", "--postgres", self.postgres]
        )
        #expect(result.status != 0)
        #expect(result.error.contains("127.0.0.1:1"), "\(result.error)")
    }

    @Test func unreachablePostgresNamesHostAndPort() async throws {
        let result = try await PushFleetProcess.run(["status", UUID().uuidString, "--redis", self.redis, "--postgres", "postgres://postgres@127.0.0.1:1/pushfleet"])
        #expect(result.status != 0)
        #expect(result.error.contains("127.0.0.1:1"), "\(result.error)")
    }

    @Test func sameCampaignIdTwiceCreatesOneCampaign() async throws {
        let file = try self.writeFile((0..<2_500).map { TestTokens.token($0).hexString } + [TestTokens.token(0).hexString])
        let id = UUID()
        let first = try await self.launch(["--tokens", file, "--payload", self.payload, "--campaign-id", id.uuidString, "--json"])
        #expect(first.status == 0, "\(first.error)")
        #expect(first.output.contains("\"total\":2500"))
        #expect(first.output.contains("\"duplicates_dropped\":1"))
        #expect(first.output.contains("\"shards\":3"))
        #expect(first.output.contains("\"created\":true"))
        let second = try await self.launch(["--tokens", file, "--payload", self.payload, "--campaign-id", id.uuidString, "--json"])
        #expect(second.status == 0)
        #expect(second.output.contains("\"created\":false"))
        let cancel = try await PushFleetProcess.run(["campaign", "cancel", id.uuidString, "--redis", self.redis, "--postgres", self.postgres])
        #expect(cancel.status == 0, "\(cancel.error)")
    }

    @Test func fromRegistryTargetsTheImportedTokensOfTheTopic() async throws {
        let topic = "com.example.registry.\(UUID().uuidString.prefix(8).lowercased())"
        let file = try self.writeFile((0..<1_234).map { TestTokens.token($0, seed: 77).hexString })
        let imported = try await PushFleetProcess.run(
            ["tokens", "import", file, "--topic", topic, "--environment", "production", "--redis", self.redis, "--postgres", self.postgres]
        )
        #expect(imported.status == 0, "\(imported.error)")
        #expect(imported.output.contains("imported 1234 tokens"))
        let launched = try await PushFleetProcess.run(
            ["launch", "--topic", topic, "--from-registry", "--payload", self.payload, "--shard-size", "500", "--json",
             "--redis", self.redis, "--postgres", self.postgres]
        )
        #expect(launched.status == 0, "\(launched.error)")
        #expect(launched.output.contains("\"total\":1234"))
        #expect(launched.output.contains("\"shards\":3"))
        let other = try await PushFleetProcess.run(
            ["launch", "--topic", topic + ".other", "--from-registry", "--payload", self.payload, "--redis", self.redis, "--postgres", self.postgres]
        )
        #expect(other.status != 0)
        #expect(other.error.contains("no tokens"))
        if let id = launched.output.split(separator: "\"")[safe: 3] {
            _ = try await PushFleetProcess.run(["campaign", "cancel", String(id), "--redis", self.redis, "--postgres", self.postgres])
        }
    }
}

extension Array {
    subscript(safe index: Int) -> Element? { self.indices.contains(index) ? self[index] : nil }
}
