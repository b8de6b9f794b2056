import Foundation
import Logging
import Prometheus
import PushFleetObservability
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The metrics and health endpoint over a real socket.
@Suite struct ObservabilityServerTests {
    private func start(_ readiness: Readiness, registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry()) async throws -> ObservabilityServer {
        try await ObservabilityServer.start(host: "127.0.0.1", port: 0, registry: registry, readiness: readiness, logger: Logger(label: "test"))
    }

    @Test func metricsAreTheRegistrysText() async throws {
        let registry = PrometheusCollectorRegistry()
        registry.makeCounter(
            descriptor: MetricNameDescriptor(namespace: "pushfleet", metricName: "test", unitName: "total", helpText: "A test counter."),
            labels: [("reason", "BadDeviceToken")]
        ).increment(by: Int64(3))
        let server = try await self.start(Readiness(), registry: registry)
        defer { Task { await server.close() } }
        let (status, body) = try await PrometheusText.get("/metrics", port: server.port)
        #expect(status == 200)
        #expect(PrometheusText(body).value("pushfleet_test_total", ["reason": "BadDeviceToken"]) == 3)
        #expect(try await PrometheusText.get("/healthz", port: server.port).status == 200)
        #expect(try await PrometheusText.get("/metricsx", port: server.port).status == 404)
        var post = URLRequest(url: URL(string: "http://127.0.0.1:\(server.port)/metrics")!)
        post.httpMethod = "POST"
        let (_, response) = try await URLSession.shared.data(for: post)
        #expect((response as? HTTPURLResponse)?.statusCode == 405)
    }

    /// A failing or silent required check makes the process unready and is named; an optional one
    /// is reported and does not.
    @Test func readinessNamesWhatIsWrong() async throws {
        let never = Readiness.Check("stuck") {
            // Answers only long after the timeout below.
            try? await Task.sleep(for: .seconds(60))
            return nil
        }
        let server = try await self.start(
            Readiness(
                [Readiness.Check("redis") { nil }, Readiness.Check("postgres") { "connection refused (127.0.0.1:5432)" }, never],
                timeout: .milliseconds(300)
            )
        )
        defer { Task { await server.close() } }
        let (status, body) = try await PrometheusText.get("/readyz", port: server.port)
        #expect(status == 503)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        #expect(object["ready"] as? Bool == false)
        let checks = try #require(object["checks"] as? [String: String])
        #expect(checks["redis"] == "ok")
        #expect(checks["postgres"] == "connection refused (127.0.0.1:5432)")
        #expect(checks["stuck"]?.hasPrefix("no answer within") == true)

        let standby = try await self.start(Readiness([Readiness.Check("redis") { nil }, Readiness.Check("leader", required: false) { "standing by" }]))
        defer { Task { await standby.close() } }
        let (readyStatus, readyBody) = try await PrometheusText.get("/readyz", port: standby.port)
        #expect(readyStatus == 200)
        #expect(readyBody.contains("\"leader\":\"standing by\""))
    }

    @Test func aPortInUseIsAClearError() async throws {
        let first = try await self.start(Readiness())
        defer { Task { await first.close() } }
        await #expect {
            _ = try await ObservabilityServer.start(
                host: "127.0.0.1", port: first.port, registry: PrometheusCollectorRegistry(), readiness: Readiness(), logger: Logger(label: "test")
            )
        } throws: { error in
            "\(error)".contains("127.0.0.1:\(first.port)")
        }
    }
}
