import CoreMetrics
import Synchronization

/// The simulator's ledger as gauges (`pushfleet_mock_apns_*`), set from a snapshot before each
/// scrape. Gauges, not counters: `POST /reset` sets the ledger back to zero.
public final class SimulatorMetrics: Sendable {
    private let accepted = Meter(label: "pushfleet_mock_apns_notifications", dimensions: [("outcome", "accepted"), ("reason", "")])
    private let distinctTokens = Meter(label: "pushfleet_mock_apns_distinct_tokens")
    private let duplicateDeliveries = Meter(label: "pushfleet_mock_apns_duplicate_deliveries")
    private let pings = Meter(label: "pushfleet_mock_apns_pings")
    private let labeled = Mutex<[String: Meter]>([:])

    public init() {}

    public func observe(_ snapshot: DeliveryLedger.Snapshot) {
        self.accepted.set(snapshot.accepted)
        self.distinctTokens.set(snapshot.distinctTokens)
        self.duplicateDeliveries.set(snapshot.duplicateDeliveries)
        self.pings.set(snapshot.pings)
        self.labeled.withLock { gauges in
            // Every series seen once stays, at 0 after a reset.
            for (key, gauge) in gauges where key.hasPrefix("rejected ") && snapshot.rejected[String(key.dropFirst("rejected ".count))] == nil {
                gauge.set(0)
            }
            for (reason, count) in snapshot.rejected {
                Self.gauge(&gauges, "rejected \(reason)", "pushfleet_mock_apns_notifications", [("outcome", "rejected"), ("reason", reason)]).set(count)
            }
            for (name, count) in snapshot.connections {
                Self.gauge(&gauges, "connections \(name)", "pushfleet_mock_apns_connections_accepted", [("protocol", name)]).set(count)
            }
            for (cause, count) in snapshot.closes {
                Self.gauge(&gauges, "closes \(cause)", "pushfleet_mock_apns_closes", [("cause", cause)]).set(count)
            }
        }
    }

    private static func gauge(_ gauges: inout [String: Meter], _ key: String, _ label: String, _ dimensions: [(String, String)]) -> Meter {
        if let gauge = gauges[key] { return gauge }
        let gauge = Meter(label: label, dimensions: dimensions)
        gauges[key] = gauge
        return gauge
    }
}
