import Testing

@testable import PushFleetServices

/// The labels the fleet's metrics give APNs' reasons stay few and plain whatever a gateway says.
@Suite struct FleetMetricsTests {
    @Test func apnsReasonsAreTheirOwnLabels() {
        for reason in ["BadDeviceToken", "Unregistered", "InvalidToken", "TooManyProviderTokenUpdates", "Shutdown"] {
            #expect(FleetMetrics.reasonLabel(reason, kept: 0) == reason)
        }
    }

    @Test func anythingElseIsOther() {
        #expect(FleetMetrics.reasonLabel("", kept: 0) == "other")
        #expect(FleetMetrics.reasonLabel("Bad Device Token", kept: 0) == "other")
        #expect(FleetMetrics.reasonLabel("a\"b", kept: 0) == "other")
        #expect(FleetMetrics.reasonLabel(String(repeating: "A", count: 49), kept: 0) == "other")
        #expect(FleetMetrics.reasonLabel(String(repeating: "A", count: 48), kept: 0) == String(repeating: "A", count: 48))
    }

    @Test func reasonsPastTheLimitAreOther() {
        #expect(FleetMetrics.reasonLabel("BadDeviceToken", kept: FleetMetrics.reasonLimit - 1) == "BadDeviceToken")
        #expect(FleetMetrics.reasonLabel("BadDeviceToken", kept: FleetMetrics.reasonLimit) == "other")
    }
}
