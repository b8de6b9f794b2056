import APNSTransport
import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetObservability
import PushFleetPostgres
import PushFleetServices

/// Runs the coordinator until SIGTERM/SIGINT.
struct Coordinator: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fold progress into Postgres, re-queue expired shards, apply feedback; one leader at a time."
    )

    @Option(help: "Milliseconds between two rounds.")
    var intervalMs: Int = 1_000

    @Option(help: "Binary feedback service HOST:PORT to poll (needs --cert/--key or --p12).")
    var feedbackEndpoint: String?

    @Option(help: "Topic whose tokens the feedback service reports.")
    var feedbackTopic: String?

    @Option(help: "Environment of the feedback service: production or sandbox. (default: production)", transform: APNsEnvironment.option("--feedback-environment"))
    var feedbackEnvironment: APNsEnvironment = .production

    @Option(help: "Seconds between two polls of the feedback service.")
    var feedbackIntervalS: Int = 60

    @Option(help: "Days per-token failures, and finished notifications with their per-device outcomes, are kept (0 keeps them forever); campaign counts and the registry are not affected.")
    var tokenFailureRetentionDays: Int = 30

    @Option(help: "Seconds a campaign paused by an APNs outage (5xx, or 429 past the retries) waits before it is resumed; doubled for each further outage of the campaign, up to 600.")
    var outageResumeS: Double = 30

    @OptionGroup var tls: TLSOptions
    @OptionGroup var state: StateOptions
    @OptionGroup var metrics: MetricsOptions
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard self.intervalMs >= 10 else { throw ValidationError("--interval-ms is at least 10") }
        guard self.outageResumeS > 0, self.outageResumeS <= 86_400 else { throw ValidationError("--outage-resume-s must be more than 0 and at most 86400") }
        guard self.tokenFailureRetentionDays >= 0 else { throw ValidationError("--token-failure-retention-days must not be negative") }
        if self.feedbackEndpoint != nil {
            guard self.feedbackTopic != nil else { throw ValidationError("--feedback-endpoint needs --feedback-topic") }
            guard self.tls.hasIdentity else { throw ValidationError("--feedback-endpoint needs a client certificate: --cert and --key, or --p12") }
        }
    }

    func run() async throws {
        self.log.bootstrap()
        let registry = self.metrics.bootstrap()
        let logger = makeLogger("pushfleet.coordinator")
        var feedback: [CoordinatorService.FeedbackSource] = []
        if let text = self.feedbackEndpoint, let topic = self.feedbackTopic {
            let endpoint = try Endpoint(parsing: text, option: "--feedback-endpoint")
            feedback.append(.init(host: endpoint.host, port: endpoint.port, tls: try self.tls.clientTLS(), topic: topic, environment: self.feedbackEnvironment))
        }
        let configuration = CoordinatorService.Configuration(
            interval: .milliseconds(self.intervalMs), feedback: feedback, feedbackInterval: .seconds(self.feedbackIntervalS),
            tokenFailureRetention: self.tokenFailureRetentionDays > 0 ? .seconds(self.tokenFailureRetentionDays * 86_400) : nil,
            outageResumeDelay: .milliseconds(Int(self.outageResumeS * 1000)), outageResumeMaximum: .seconds(max(600, Int(self.outageResumeS)))
        )
        let state = self.state
        let started = Started<(coordinator: CoordinatorService, store: CampaignStore)>()
        let readiness = Readiness([
            try Readiness.Check.redis(self.state.redis),
            Readiness.Check("postgres") {
                guard let store = started.value?.store else { return "starting" }
                do {
                    try await store.ping()
                    return nil
                } catch {
                    return "\(error)"
                }
            },
            // A standby is ready: it takes over when the leader goes.
            Readiness.Check("leader", required: false) { started.value?.coordinator.isLeading == true ? nil : "standing by" },
        ])
        let serving = DrainingService("coordinator") { drain in
            try await state.withState(logger: logger) { queue, store in
                let coordinator = CoordinatorService(configuration: configuration, queue: queue, store: store, logger: logger)
                started.set((coordinator, store))
                await coordinator.run(until: drain)
            }
        }
        let metrics = try await self.metrics.service(
            registry, readiness: readiness, beforeScrape: { await started.value?.coordinator.refreshGauges() }, logger: logger
        )
        // A round ends within a few seconds; one that does not is stuck, and the coordinator's state
        // is all in Redis and Postgres, so nothing is lost by cancelling it 10 s after SIGTERM.
        try await Lifecycle.run([metrics, serving.configuration].compactMap { $0 }, grace: .seconds(10), logger: logger)
    }
}
