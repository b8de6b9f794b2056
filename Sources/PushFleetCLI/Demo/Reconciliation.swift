import APNSMockServer
import Foundation
import PushFleetCore
import PushFleetPostgres

/// A finished campaign, as Postgres records it, against what the simulator's ledger holds.
struct Reconciliation {
    let text: String
    let isExact: Bool

    /// Over HTTP/2 unregistered tokens are answered 410 (rejected, never delivered); over the binary
    /// protocol they are accepted and reported later by the feedback service.
    init(audience: DemoAudience, record: CampaignRecord, ledger: DeliveryLedger, unregisteredMarked: Int, seconds: Double, http2: Bool) {
        let undeliverable = http2 ? audience.invalid.union(audience.unregistered) : audience.invalid
        var lost = 0
        var duplicated = 0
        for token in audience.tokens where !undeliverable.contains(token) {
            let count = ledger.deliveries(of: token)
            if count == 0 { lost += 1 }
            if count > 1 { duplicated += 1 }
        }
        let valid = audience.tokens.count - undeliverable.count
        let wronglyDelivered = undeliverable.count { ledger.deliveries(of: $0) > 0 }
        let rejected = record.rejected.values.reduce(0, +)
        let reasons = record.rejected.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        self.isExact = lost == 0 && wronglyDelivered == 0 && record.accepted + rejected == record.total
            && record.accepted == valid && rejected == undeliverable.count && duplicated <= record.resent
            && unregisteredMarked == audience.unregistered.count
        self.text = """

            reconciliation (\(String(format: "%.1f", seconds)) s from launch, \(Int(Double(record.total) / max(seconds, 1e-9)))/s)
              total (Postgres)            \(record.total)
              accepted                    \(record.accepted)
              rejected                    \(rejected)  [\(reasons)]
              accepted + rejected         \(record.accepted + rejected)
              resent                      \(record.resent)
              ledger: valid delivered     \(valid - lost) of \(valid)   lost \(lost)   duplicated \(duplicated)
              ledger: invalid delivered   \(wronglyDelivered)
              registry: unregistered      \(unregisteredMarked) of \(audience.unregistered.count) marked (\(http2 ? "410 answers" : "feedback service"))
            \(self.isExact ? "✔ exact: every valid token delivered, every invalid token rejected, every unregistered token marked" : "✘ NOT EXACT: see the counts above")
            """
    }
}
