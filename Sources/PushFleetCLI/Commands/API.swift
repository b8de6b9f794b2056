import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import PushFleetAPI
import PushFleetObservability
import PushFleetPostgres
import PushFleetServices

/// Serves the HTTP API.
struct API: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api",
        abstract: "Serve the HTTP API: notifications now, devices and groups, campaigns (OpenAPI at /openapi.json).",
        discussion: """
            Every /v1 call needs an API key (`pushfleet api-key create --topic T`) as a bearer token; \
            a key acts on its topics only. /healthz answers on the API port; --metrics-port serves \
            /metrics, /healthz and /readyz as for the other processes.
            """
    )

    @Option(help: "Address to listen on.")
    var host: String = "0.0.0.0"

    @Option(help: "Port to listen on; 0 picks a free one and logs it.")
    var port: Int = 8080

    @Option(
        help: """
            Seconds an accepted API key is taken on trust before Postgres is asked again (a ring then \
            costs one round trip less); a revoked key is refused at the latest this long after \
            `api-key revoke`. 0 checks every request.
            """
    )
    var keyCacheSeconds: Int = 5

    @OptionGroup var state: StateOptions
    @OptionGroup var metrics: MetricsOptions
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard (0...65_535).contains(self.port) else { throw ValidationError("--port is 0 to 65535, not \(self.port)") }
        guard (0...3_600).contains(self.keyCacheSeconds) else {
            throw ValidationError("--key-cache-seconds is 0 to 3600, not \(self.keyCacheSeconds)")
        }
    }

    func run() async throws {
        self.log.bootstrap()
        let registry = self.metrics.bootstrap()
        let logger = makeLogger("pushfleet.api")
        let state = self.state
        let (host, port, keyCacheLifetime) = (self.host, self.port, Duration.seconds(self.keyCacheSeconds))
        let started = Started<CampaignStore>()
        let readiness = Readiness([
            try Readiness.Check.redis(self.state.redis),
            Readiness.Check("postgres") {
                guard let store = started.value else { return "starting" }
                do {
                    try await store.ping()
                    return nil
                } catch {
                    return "\(error)"
                }
            },
        ])
        let serving = DrainingService("api") { _ in
            try await state.withState(logger: logger) { queue, store in
                started.set(store)
                // Opens a pooled Postgres connection now, not in the first request's time (a
                // doorbell's first ring); in the background, as the pool waits for a Postgres that
                // is down.
                let warming = Task { try? await store.ping() }
                defer { warming.cancel() }
                let server = APIServer(store: store, queue: queue, keyCacheLifetime: keyCacheLifetime, logger: logger)
                // The server hears the group's graceful shutdown itself: it stops accepting, and
                // finishes the requests it has.
                try await server.application(host: host, port: port) { bound in
                    logger.info("API listening", metadata: ["address": "\(host):\(bound)"])
                }.run()
            }
        }
        let metrics = try await self.metrics.service(registry, readiness: readiness, logger: logger)
        try await Lifecycle.run([metrics, serving.configuration].compactMap { $0 }, grace: .seconds(10), logger: logger)
    }
}

/// Creates, lists and revokes API keys.
struct APIKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key",
        abstract: "Create, list and revoke keys of `pushfleet api`.",
        subcommands: [Create.self, List.self, Revoke.self]
    )

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a key for some topics and print it (shown this once; only its hash is stored)."
        )

        @Option(help: "A topic the key may act on; repeat for more. '*' is every topic, and only such a key may set a group's members (groups are shared by all apps).")
        var topic: [String] = []

        @Option(help: "A note for people: who or what uses the key.")
        var label: String?

        @OptionGroup var state: StateOptions

        func validate() throws {
            guard !self.topic.isEmpty, self.topic.allSatisfy({ !$0.isEmpty }) else { throw ValidationError("give at least one --topic") }
        }

        func run() async throws {
            let (key, bearer) = try await self.state.withStore(logger: makeLogger("pushfleet.api-key")) { store in
                try await store.createAPIKey(topics: self.topic, label: self.label)
            }
            writeStandardError("key \(key.id) for \(key.topics.joined(separator: ", ")); keep it secret, it is not shown again\n")
            print(bearer)
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the keys (never their secrets).")

        @OptionGroup var state: StateOptions

        func run() async throws {
            let keys = try await self.state.withStore(logger: makeLogger("pushfleet.api-key")) { store in try await store.apiKeys() }
            for key in keys {
                let revoked = key.revokedAt.map { "  revoked \($0.formatted(.iso8601))" } ?? ""
                print("\(key.id)  \(key.topics.joined(separator: ","))  \(key.createdAt.formatted(.iso8601))\(revoked)\(key.label.map { "  \($0)" } ?? "")")
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key: its requests get 401 from then on (after `api --key-cache-seconds` at the latest).")

        @Argument(help: "The key's id (the part after pf_).")
        var id: String

        @OptionGroup var state: StateOptions

        func run() async throws {
            let revoked = try await self.state.withStore(logger: makeLogger("pushfleet.api-key")) { store in try await store.revokeAPIKey(self.id) }
            guard revoked else { throw CLIError("no key \(self.id) that is not revoked already") }
        }
    }
}
