import APNSMockServer
import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetTestSupport
import Testing

/// A personalized campaign (`launch --payload '{"aps":{"alert":"Hi {{first_name|there}}, {{offer}}"}}'`
/// with an audience in CSV) of 100,000 recipients through two workers, on either protocol: every
/// recipient reached got its own rendering (the simulator's digest of each token's payload, against
/// the payload this test writes out by hand), once, and the counts are exact. Values hold what CSV
/// must quote and JSON must escape; an empty one takes the fallback; a token listed twice gets the
/// values of its first line. With `flushdb`, Redis loses everything once a fifth is delivered: the
/// coordinator rebuilds the queue from Postgres, values included, and every recipient still gets
/// its own payload (duplicates, counted in `resent`, carry the same one).
extension PipelineTests {
    @Test(arguments: ["binary", "http2"], ["none", "flushdb"])
    func aPersonalizedCampaignGivesEachRecipientItsOwnPayload(protocol: String, fault: String) async throws {
        let http2 = `protocol` == "http2"
        // A database of its own: FLUSHDB empties only what this test's fleet keeps.
        let fixture = try await PipelineFixture.start(count: 100_000).onRedisDatabase(10)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()

        // Recipient i's fields as the CSV holds them, and its payload as JSON writes it.
        func name(_ index: Int) -> (csv: String, json: String) {
            if index % 5 == 0 { return ("", "there") }
            if index % 7 == 0 { return (#""Zoë ""the"" \ one""#, #"Zoë \"the\" \\ one"#) }
            return ("Name\(index)", "Name\(index)")
        }
        // A comma on odd lines, so that they are quoted: the reader splits the others in place.
        func offer(_ index: Int) -> String { "\(10 + index % 90)% off\(index % 2 == 1 ? "," : "") today" }
        func expected(_ index: Int) -> [UInt8] { Array(#"{"aps":{"alert":"Hi \#(name(index).json), \#(offer(index))"}}"#.utf8) }
        var lines = ["token,first_name,offer"]
        for (index, token) in fixture.tokens.enumerated() {
            lines.append("\(token.hexString),\(name(index).csv)," + (index % 2 == 1 ? "\"\(offer(index))\"" : offer(index)))
        }
        lines.append("\(fixture.tokens[1].hexString),Someone Else,\"nothing\"")
        let audience = NSTemporaryDirectory() + "pushfleet-personalized-\(UUID().uuidString).csv"
        try lines.joined(separator: "\n").write(toFile: audience, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: audience) }

        // With `flushdb` the loss must land mid-campaign: the workers start once the launch has
        // returned, and the campaign is throttled to 10,000 a second (some 8 s left at the loss).
        // CI once saw a binary run whose launch returned late, after the workers had sent all
        // 100,000: the FLUSHDB then found nothing to lose, and nothing was rebuilt.
        let id = try await fixture.launch(
            ["--payload", #"{"aps":{"alert":"Hi {{first_name|there}}, {{offer}}"}}"#] + (fault == "flushdb" ? ["--rate", "10000"] : []),
            protocol: `protocol`, audience: audience
        )
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }
        let undeliverable = fixture.undeliverable(http2: http2)
        if fault == "flushdb" {
            let deadline = ContinuousClock.now + .seconds(600)
            while fixture.mock.ledger.snapshot().distinctTokens < 20_000 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let client = RedisClient(configuration: try RedisConfiguration(url: fixture.redisURL), logger: silentRedisLogger)
            let reply = try await client.withConnection { try $0.command([Array("FLUSHDB".utf8)]) }
            try await client.shutdown()
            #expect(reply.string == "OK")
            #expect(
                fixture.mock.ledger.snapshot().distinctTokens < fixture.tokens.count - undeliverable.count,
                "the loss landed after every recipient was reached: it tests nothing"
            )
        }
        let status = try await fixture.waitForCompletion(id, limit: .seconds(900))
        #expect(status["state"] as? String == "completed", "the coordinator's log ends:\n\(coordinator.standardError.suffix(4_000))")
        let resent = try #require(status["resent"] as? Int)
        fixture.expectReconciled(status, duplicatesAllowed: fault == "none" ? 0 : resent, http2: http2)

        var wrong: [String] = []
        for (index, token) in fixture.tokens.enumerated() where !undeliverable.contains(token) {
            if fixture.mock.ledger.payloadDigest(of: token) != DeliveryLedger.digest(expected(index)) {
                wrong.append("line \(index + 2): \(token.hexString)")
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) recipients got another payload than their own, first \(wrong.prefix(5))")
        if fault == "flushdb" {
            let generation = try await fixture.withStore { try await $0.campaign(id)?.queueGeneration }
            #expect(generation == 1, "the queue was rebuilt once")
        }
        await stopAll(workers + [coordinator])
    }
}

/// Personalization in a launch in parts: the French payload is a template, the fallback is not.
/// French recipients get their own renderings, every other recipient the fallback as it is,
/// each once, on either protocol.
extension PipelineTests {
    @Test(arguments: ["binary", "http2"])
    func aLocalizedTemplateIsRenderedForItsLocaleOnly(protocol: String) async throws {
        let http2 = `protocol` == "http2"
        let fixture = try await PipelineFixture.start(count: 6_000)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }

        var lines = ["token,locale,first_name"]
        for (index, token) in fixture.tokens.enumerated() {
            lines.append("\(token.hexString),\(index % 2 == 0 ? "fr_FR" : "en"),Prénom\(index)")
        }
        let audience = NSTemporaryDirectory() + "pushfleet-personalized-parts-\(UUID().uuidString).csv"
        try lines.joined(separator: "\n").write(toFile: audience, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: audience) }
        let id = try await fixture.launch(
            ["--payload", #"{"aps":{"alert":"Hello"}}"#, "--localized", #"fr={"aps":{"alert":"Bonjour {{first_name}}"}}"#],
            protocol: `protocol`, audience: audience
        )
        let deadline = ContinuousClock.now + .seconds(600)
        var status: [String: Any] = [:]
        while ContinuousClock.now < deadline {
            let result = try await PushFleetProcess.run(["status", id.uuidString, "--json"] + fixture.stateArguments)
            status = try #require(try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any], "\(result.error)")
            if status["state"] as? String == "completed" { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        #expect(status["state"] as? String == "completed", "\(status)")
        fixture.expectReconciled(status, duplicatesAllowed: 0, http2: http2)
        let undeliverable = fixture.undeliverable(http2: http2)
        var wrong: [String] = []
        for (index, token) in fixture.tokens.enumerated() where !undeliverable.contains(token) {
            let payload = index % 2 == 0 ? #"{"aps":{"alert":"Bonjour Prénom\#(index)"}}"# : #"{"aps":{"alert":"Hello"}}"#
            if fixture.mock.ledger.payloadDigest(of: token) != DeliveryLedger.digest(Array(payload.utf8)) { wrong.append("line \(index + 2)") }
        }
        #expect(wrong.isEmpty, "\(wrong.count) recipients got another payload than their own, first \(wrong.prefix(5))")
        await stopAll(workers + [coordinator])
    }
}
