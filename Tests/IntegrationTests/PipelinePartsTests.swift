import APNSMockServer
import Foundation
import PushFleetCore
import PushFleetServices
import PushFleetTestSupport
import Testing

/// A campaign localized by the recipients' locales and delivered at their local time
/// (`launch --localized fr=… --localized de=… --local-time HH:MM`, an audience in CSV), through two
/// workers on either protocol. The local time is the next minute in UTC, so the recipients in UTC
/// (by their line, or by `--default-zone`) start within a minute while those in Tokyo wait for the
/// next day: their parts stay `scheduled`, nothing reaches them, and a cancel of the launch's id
/// ends them. Every recipient reached got its locale's payload (the simulator's digest of each
/// token's payload), once, including one whose token the audience lists twice.
extension PipelineTests {
    @Test(arguments: ["binary", "http2"])
    func aLocalizedLocalTimeCampaignReachesEachRecipientWithItsLocaleAtItsHour(protocol: String) async throws {
        let http2 = `protocol` == "http2"
        let fixture = try await PipelineFixture.start(count: 6_000)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }

        let payloads = [
            "fr": #"{"aps":{"alert":"Bonjour, -20 % aujourd'hui"}}"#,
            "de": #"{"aps":{"alert":"Guten Morgen, heute -20 %"}}"#,
            "default": #"{"aps":{"alert":"Good morning, 20% off today"}}"#,
        ]
        // Recipient i: locale by i % 4 (fr_FR, de, en_US, none), zone by i % 3 (UTC, none, Tokyo).
        func locale(_ index: Int) -> String? { [Optional("fr_FR"), "de", "en_US", nil][index % 4] }
        func zone(_ index: Int) -> String? { [Optional("UTC"), nil, "Asia/Tokyo"][index % 3] }
        func payloadName(_ index: Int) -> String { ["fr", "de", "default", "default"][index % 4] }
        var lines = ["token,locale,time_zone"]
        for (index, token) in fixture.tokens.enumerated() {
            lines.append("\(token.hexString),\(locale(index) ?? ""),\(zone(index) ?? "")")
        }
        // Listed again with another locale and zone: the first line decides, and it is sent once.
        lines.append("\(fixture.tokens[0].hexString),de,Asia/Tokyo")
        let audience = NSTemporaryDirectory() + "pushfleet-parts-\(UUID().uuidString).csv"
        try lines.joined(separator: "\n").write(toFile: audience, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: audience) }

        // The next whole minute, at least 20 s ahead (the launch must come before it).
        let soon = Date(timeIntervalSince1970: ((Date().timeIntervalSince1970 + 80) / 60).rounded(.down) * 60)
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = try #require(TimeZone(identifier: "UTC"))
        let clock = utc.dateComponents([.hour, .minute], from: soon)
        let hhmm = String(format: "%02d:%02d", clock.hour ?? 0, clock.minute ?? 0)
        let id = try await fixture.launch(
            ["--payload", payloads["default"]!, "--localized", "fr=\(payloads["fr"]!)", "--localized", "de=\(payloads["de"]!)",
             "--local-time", hhmm, "--default-zone", "UTC"],
            protocol: `protocol`, audience: audience
        )

        func status() async throws -> [String: Any] {
            let result = try await PushFleetProcess.run(["status", id.uuidString, "--json"] + fixture.stateArguments)
            let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
            return try #require(object, "\(result.error)")
        }
        func parts(_ status: [String: Any]) -> [String: [String: Any]] {
            Dictionary(uniqueKeysWithValues: (status["variants"] as? [[String: Any]] ?? []).map { ($0["variant"] as? String ?? "?", $0) })
        }
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))
        let later = try #require(LocalTimePlanner(hhmm, now: Date())?.start(in: tokyo))
        // Parts go by their zones' UTC offsets: UTC's and Tokyo's.
        let (now, next) = ("utc+0000", "utc+0900")
        let names = ["de", "default", "fr"].flatMap { ["\($0).\(now)", "\($0).\(next)"] }
        var launch = try await status()
        #expect(parts(launch).keys.sorted() == names.sorted())
        // Every part waits for its hour.
        if Date() < soon.addingTimeInterval(-1) {
            #expect(parts(launch).values.allSatisfy { $0["state"] as? String == "scheduled" }, "\(parts(launch).mapValues { $0["state"] ?? "?" })")
        }
        let deadline = ContinuousClock.now + .seconds(600)
        while ContinuousClock.now < deadline,
            !parts(launch).filter({ $0.key.hasSuffix(now) }).values.allSatisfy({ $0["state"] as? String == "completed" })
        {
            try await Task.sleep(for: .milliseconds(500))
            launch = try await status()
        }

        let undeliverable = fixture.undeliverable(http2: http2)
        var expected: [String: (total: Int, accepted: Int)] = [:]
        for (index, token) in fixture.tokens.enumerated() {
            let startsNow = zone(index) != "Asia/Tokyo"
            let part = "\(payloadName(index)).\(startsNow ? now : next)"
            expected[part, default: (0, 0)].total += 1
            let deliveries = fixture.mock.ledger.deliveries(of: token)
            guard startsNow, !undeliverable.contains(token) else {
                #expect(deliveries == 0, "\(part): \(token.hexString) delivered \(deliveries) times")
                continue
            }
            expected[part, default: (0, 0)].accepted += 1
            #expect(deliveries == 1, "\(part): \(token.hexString) delivered \(deliveries) times")
            let sent = try Payload(jsonText: Array(payloads[payloadName(index)]!.utf8), format: .http2(pushType: "alert"))
            #expect(fixture.mock.ledger.payloadDigest(of: token) == DeliveryLedger.digest(sent.bytes), "\(part): \(token.hexString) got another payload")
        }
        for (name, part) in parts(launch) {
            #expect(part["total"] as? Int == expected[name]?.total, "\(name)")
            #expect(part["accepted"] as? Int == (expected[name]?.accepted ?? 0), "\(name)")
            #expect(part["state"] as? String == (name.hasSuffix(now) ? "completed" : "scheduled"), "\(name)")
            if name.hasSuffix(next) { #expect(part["starts_at"] as? String == later.formatted(.iso8601), "\(name)") }
        }
        #expect(launch["state"] as? String == "scheduled")
        #expect(launch["total"] as? Int == fixture.tokens.count, "the duplicate line is dropped")
        #expect(fixture.mock.ledger.snapshot().duplicateDeliveries == 0)

        // The launch's id ends the parts still waiting.
        let cancel = try await PushFleetProcess.run(["campaign", "cancel", id.uuidString] + fixture.stateArguments)
        #expect(cancel.status == 0, "\(cancel.error)")
        launch = try await status()
        for (name, part) in parts(launch) {
            #expect(part["state"] as? String == (name.hasSuffix(now) ? "completed" : "cancelled"), "\(name)")
        }
        #expect(launch["state"] as? String == "cancelled")
        await stopAll(workers + [coordinator])
    }
}
