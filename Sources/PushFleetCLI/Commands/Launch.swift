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

    @Option(help: "A split test's variant, NAME=PAYLOAD:WEIGHT (PAYLOAD as for --payload: JSON text or @FILE); repeat for each, instead of --payload. Each recipient gets one variant, by its token, in proportion to the weights; `status` of the printed id counts each variant.")
    var variant: [String] = []

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
        if let rate = self.rate, !Launcher.rateLimits.contains(rate) {
            throw ValidationError("--rate is 1 to 100000000 notifications a second, not \(rate)")
        }
        guard (self.notification.payload == nil) != self.variant.isEmpty else {
            throw ValidationError("Give --payload, or a --variant for each variant of a split test (one of them).")
        }
        if !self.variant.isEmpty {
            guard self.tokens != "-" else { throw ValidationError("a split test reads its audience more than once: give a --tokens file, not standard input") }
            for text in self.variant { _ = try Self.parseVariant(text) }
        }
    }

    func run() async throws {
        self.log.bootstrap()
        let n = self.notification
        let logger = makeLogger("pushfleet.launch")
        let variants = try self.variant.map { text in
            let (name, payload, weight) = try Self.parseVariant(text)
            return SplitLauncher.Variant(
                name: name, payload: try PayloadOption.load(payload, format: n.payloadFormat, option: "--variant \(name)"), weight: weight
            )
        }
        var request = Launcher.Request(
            id: self.campaignId.flatMap(UUID.init(uuidString:)), topic: n.topic, environment: n.environment,
            payload: try variants.first?.payload ?? n.loadPayload(),
            pushType: n.pushType, priority: n.priority, expiration: n.expiration, collapseID: n.collapseId,
            shardSize: self.shardSize, requiredTokenSize: n.requiredTokenSize
        )
        request.rateLimit = self.rate
        request.startsAt = self.at.flatMap(Self.parseTime)
        if !variants.isEmpty {
            // The split test's id before its variants are launched: one that dies half way is
            // finished by launching again with it.
            let id = request.id ?? UUID()
            request.id = id
            if self.campaignId == nil {
                writeStandardError("split test \(id.uuidString.lowercased()): if this launch is interrupted, run it again with --campaign-id \(id.uuidString.lowercased())\n")
            }
            let result = try await self.state.withState(logger: logger) { queue, store in
                let launcher = SplitLauncher(launcher: Launcher(queue: queue, store: store))
                if let path = self.tokens {
                    return try await launcher.launch(request, variants: variants) {
                        FileTokenSource(reader: try TokenFileReader(path: path), requiredSize: request.requiredTokenSize)
                    }
                }
                return try await launcher.launch(request, variants: variants) {
                    RegistryTokenSource(store: store, topic: n.topic, environment: n.environment)
                }
            }
            self.print(result)
            return
        }
        let reader = try self.tokens.map { try TokenFileReader(path: $0) }
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
            Swift.print("{\"id\":\"\(result.id.uuidString.lowercased())\",\"total\":\(result.total),\"duplicates_dropped\":\(result.duplicatesDropped),\"shards\":\(result.shardCount),\"created\":\(result.created)}")
        } else {
            if !result.created { writeStandardError("campaign \(result.id.uuidString.lowercased()) exists already; nothing changed\n") }
            Swift.print(result.id.uuidString.lowercased())
        }
    }

    private func print(_ result: SplitLauncher.Result) {
        let id = result.id.uuidString.lowercased()
        if self.json {
            let variants = result.variants.map { v in
                #"{"name":\#(StatusReport.quote(v.name)),"id":"\#(v.launch.id.uuidString.lowercased())","weight":\#(v.weight),"total":\#(v.launch.total),"created":\#(v.launch.created)}"#
            }
            Swift.print(#"{"id":"\#(id)","total":\#(result.total),"created":\#(result.created),"variants":[\#(variants.joined(separator: ","))]}"#)
        } else {
            if !result.created { writeStandardError("split test \(id) exists already; nothing changed\n") }
            for v in result.variants {
                writeStandardError("variant \(v.name): campaign \(v.launch.id.uuidString.lowercased()), \(v.launch.total) tokens\n")
            }
            Swift.print(id)
        }
    }

    /// `NAME=PAYLOAD:WEIGHT`, the weight after the last colon (a JSON payload has colons of its own).
    static func parseVariant(_ text: String) throws -> (name: String, payload: String, weight: Int) {
        guard let equals = text.firstIndex(of: "="), let colon = text.lastIndex(of: ":"), equals < colon,
            let weight = Int(text[text.index(after: colon)...]), weight >= 1, !text[..<equals].isEmpty
        else {
            throw ValidationError("--variant is NAME=PAYLOAD:WEIGHT (PAYLOAD JSON text or @FILE, WEIGHT at least 1), such as A=@a.json:50, not \"\(text)\"")
        }
        return (String(text[..<equals]), String(text[text.index(after: equals)..<colon]), weight)
    }

    /// An ISO 8601 time with its zone (`Z` or an offset), with or without fractional seconds.
    static func parseTime(_ text: String) -> Date? {
        (try? Date(text, strategy: .iso8601)) ?? (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
    }
}
