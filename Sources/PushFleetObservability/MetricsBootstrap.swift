import CoreMetrics
public import Prometheus

/// Routes swift-metrics into a Prometheus registry, once per process, before any metric is made.
public enum MetricsBootstrap {
    /// Buckets of the duration histograms, by metric name: APNs answers take milliseconds, a
    /// checkpoint a Redis round trip.
    static let durationBuckets: [String: [Duration]] = [
        "pushfleet_apns_answer_duration_seconds": [
            .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ],
        "pushfleet_checkpoint_duration_seconds": [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1), .seconds(5),
        ],
    ]

    /// Bootstraps the metrics system with a new registry and returns it. Call it once, first.
    public static func prometheus() -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.durationHistogramBuckets = Self.durationBuckets
        MetricsSystem.bootstrap(factory)
        return registry
    }
}
