import APNSMockServer
import Foundation
import PushFleetCore
import PushFleetServices
import PushFleetTestSupport
import Testing

/// A split test (`launch --variant A=…:70 --variant B=…:30 --rate 400`) through two workers on
/// either protocol, paused and resumed by its id along the way: each variant's counts add up to the
/// split test's, and match the ledger, token by token, for the recipients the split gave it.
extension PipelineTests {
    @Test(arguments: ["binary", "http2"])
    func aSplitTestsVariantsAddUpAndMatchTheLedger(protocol: String) async throws {
        let http2 = `protocol` == "http2"
        let fixture = try await PipelineFixture.start(count: 20_000)
        defer { Task { await fixture.stop() } }
        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }
        // Throttled to 400 a second (about 50 s), so that the pause lands while it runs, however
        // long the split launch itself takes on a loaded machine.
        let id = try await fixture.launch(
            ["--variant", #"A={"aps":{"alert":"20% off today"}}:70"#, "--variant", #"B={"aps":{"alert":"Free shipping today"}}:30"#,
             "--rate", "400"],
            protocol: `protocol`
        )

        func status() async throws -> [String: Any] {
            let result = try await PushFleetProcess.run(["status", id.uuidString, "--json"] + fixture.stateArguments)
            let object = try JSONSerialization.jsonObject(with: Data(result.output.utf8)) as? [String: Any]
            return try #require(object, "\(result.error)")
        }
        // The split test answers to its id: paused and resumed as one.
        for command in ["pause", "resume"] {
            let result = try await PushFleetProcess.run(["campaign", command, id.uuidString] + fixture.stateArguments)
            #expect(result.status == 0, "\(command): \(result.error)")
        }
        var split = try await status()
        let deadline = ContinuousClock.now + .seconds(600)
        while split["state"] as? String != "completed", ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(500))
            split = try await status()
        }
        #expect(split["state"] as? String == "completed")
        #expect(split["split"] as? Bool == true)
        let variants = try #require(split["variants"] as? [[String: Any]])
        #expect(variants.map { $0["variant"] as? String } == ["A", "B"])

        // Each variant's share, as the split gives it, and what the ledger delivered of it.
        let splitter = VariantSplit(weights: [70, 30], salt: SplitTest.salt(id))
        let undeliverable = fixture.undeliverable(http2: http2)
        var recipients = [0, 0]
        var delivered = [0, 0]
        // A delivery twice is allowed only as a counted re-send (a lease lost on a loaded machine,
        // the unproven tail of a run given up), as in every pipeline test.
        var duplicates = 0
        for token in fixture.tokens {
            let variant = splitter.variant(of: token)
            recipients[variant] += 1
            let deliveries = fixture.mock.ledger.deliveries(of: token)
            if undeliverable.contains(token) {
                #expect(deliveries == 0, "variant \(variant): \(token.hexString) delivered \(deliveries) times")
            } else {
                #expect(deliveries >= 1, "variant \(variant): \(token.hexString) never delivered")
            }
            duplicates += max(0, deliveries - 1)
            if deliveries > 0 { delivered[variant] += 1 }
        }
        let resent = try #require(split["resent"] as? Int)
        #expect(duplicates <= resent, "\(duplicates) deliveries twice, \(resent) counted as re-sent")
        for (index, variant) in variants.enumerated() {
            let rejected = (variant["rejected"] as? [String: Int] ?? [:]).values.reduce(0, +)
            #expect(variant["total"] as? Int == recipients[index])
            #expect(variant["accepted"] as? Int == delivered[index], "variant \(index): accepted against the ledger")
            #expect((variant["accepted"] as? Int ?? -1) + rejected == recipients[index])
            #expect(variant["state"] as? String == "completed")
        }
        // The variants add up to the split test, and it to the audience.
        #expect(split["total"] as? Int == fixture.tokens.count)
        #expect(variants.reduce(0) { $0 + ($1["accepted"] as? Int ?? 0) } == split["accepted"] as? Int)
        #expect(split["accepted"] as? Int == fixture.tokens.count - undeliverable.count)
        #expect(recipients[0] > recipients[1], "70:30 gives A more")
        await stopAll(workers + [coordinator])
    }
}
