import ArgumentParser
import Foundation
import PushFleetCore
import PushFleetPostgres
import PushFleetServices

/// Creates a campaign from a token file, standard input, or the registry.
struct Launch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate an audience and a payload, create the campaign, and print its id.",
        discussion: """
            Token file: one token per line in hex, spaces inside a token allowed, blank lines and '#' \
            comments skipped; duplicates are dropped and counted. Every line is checked before \
            anything becomes visible: a bad line fails the launch with its file and line, and nothing \
            is created. Launching again with the same --campaign-id changes nothing.
            """
    )

    @OptionGroup var notification: NotificationOptions

    @Option(help: "Token file, or '-' for standard input.")
    var tokens: String?

    @Flag(help: "Target every active registry token of the topic and environment instead of --tokens.")
    var fromRegistry = false

    @Option(help: "Tokens per shard.")
    var shardSize: Int = 1_000

    @Option(help: "Campaign id (UUID); launching the same id twice creates one campaign.")
    var campaignId: String?

    @Option(help: "Start at this time (ISO 8601, e.g. 2026-12-01T09:00:00Z or 2026-12-01T09:00:00+08:00): the campaign is 'scheduled' until then. Default: at once.")
    var at: String?

    @Option(help: "Send at most N notifications a second, fleet-wide, however many workers there are (`campaign set-rate` changes it while it runs). Default: as fast as the fleet can.")
    var rate: Int?

    @Flag(help: "Print a JSON object instead of the id.")
    var json = false

    @OptionGroup var state: StateOptions
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard (self.tokens == nil) != !self.fromRegistry else { throw ValidationError("Give --tokens FILE or --from-registry (one of them).") }
        guard (1...100_000).contains(self.shardSize) else { throw ValidationError("--shard-size is between 1 and 100000") }
        if let id = self.campaignId, UUID(uuidString: id) == nil { throw ValidationError("--campaign-id must be a UUID, got \"\(id)\"") }
        if let at = self.at, Self.parseTime(at) == nil {
            throw ValidationError("--at is an ISO 8601 time with its zone, such as 2026-12-01T09:00:00Z, not \"\(at)\"")
        }
        if let rate = self.rate, rate < 1 { throw ValidationError("--rate is at least 1 notification a second, not \(rate)") }
    }

    func run() async throws {
        self.log.bootstrap()
        let n = self.notification
        let payload = try n.loadPayload()
        let reader = try self.tokens.map { try TokenFileReader(path: $0) }
        let logger = makeLogger("pushfleet.launch")
        var request = Launcher.Request(
            id: self.campaignId.flatMap(UUID.init(uuidString:)), topic: n.topic, environment: n.environment, payload: payload,
            pushType: n.pushType, priority: n.priority, expiration: n.expiration, collapseID: n.collapseId,
            shardSize: self.shardSize, requiredTokenSize: n.requiredTokenSize
        )
        request.rateLimit = self.rate
        request.startsAt = self.at.flatMap(Self.parseTime)
        let result = try await self.state.withState(logger: logger) { queue, store in
            let launcher = Launcher(queue: queue, store: store)
            if let reader {
                var source = FileTokenSource(reader: reader, requiredSize: request.requiredTokenSize)
                return try await launcher.launch(request, tokens: &source)
            }
            var source = RegistryTokenSource(store: store, topic: n.topic, environment: n.environment)
            return try await launcher.launch(request, tokens: &source)
        }
        if self.json {
            print("{\"id\":\"\(result.id.uuidString.lowercased())\",\"total\":\(result.total),\"duplicates_dropped\":\(result.duplicatesDropped),\"shards\":\(result.shardCount),\"created\":\(result.created)}")
        } else {
            if !result.created { writeStandardError("campaign \(result.id.uuidString.lowercased()) exists already; nothing changed\n") }
            print(result.id.uuidString.lowercased())
        }
    }

    /// An ISO 8601 time with its zone (`Z` or an offset), with or without fractional seconds.
    static func parseTime(_ text: String) -> Date? {
        (try? Date(text, strategy: .iso8601)) ?? (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
    }
}
