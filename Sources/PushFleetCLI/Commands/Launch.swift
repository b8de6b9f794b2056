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

    @Option(help: "The APNs topic: the app's bundle ID, plus the push type's suffix for those that have one (com.example.app.voip for voip).")
    var topic: String

    @Option(help: "The payload: JSON text, or @FILE.")
    var payload: String

    @Option(help: "Token file, or '-' for standard input.")
    var tokens: String?

    @Flag(help: "Target every active registry token of the topic and environment instead of --tokens.")
    var fromRegistry = false

    @Option(help: "production or sandbox.")
    var environment: String = "production"

    @Option(help: "apns-push-type: alert, background, voip, …")
    var pushType: String = "alert"

    @Option(help: "10, 5 or 1.")
    var priority: Int = 10

    @Option(help: "Epoch seconds after which APNs may drop the notification; 0 = don't store.")
    var expiration: Int = 0

    @Option(help: "apns-collapse-id, so a re-send shows once (at most 64 bytes).")
    var collapseId: String?

    @Option(help: "Tokens per shard.")
    var shardSize: Int = 1_000

    @Option(help: "Campaign id (UUID); launching the same id twice creates one campaign.")
    var campaignId: String?

    @Option(help: "http2 or binary: the payload limit and token size to check against.")
    var `protocol`: String = "http2"

    @Flag(help: "Print a JSON object instead of the id.")
    var json = false

    @OptionGroup var state: StateOptions
    @OptionGroup var log: LogOptions

    func validate() throws {
        guard (self.tokens == nil) != !self.fromRegistry else { throw ValidationError("Give --tokens FILE or --from-registry (one of them).") }
        guard ["production", "sandbox"].contains(self.environment) else { throw ValidationError("--environment is production or sandbox") }
        guard ["http2", "binary"].contains(self.protocol) else { throw ValidationError("--protocol is http2 or binary") }
        guard [10, 5, 1].contains(self.priority) else { throw ValidationError("--priority is 10, 5 or 1") }
        guard (1...100_000).contains(self.shardSize) else { throw ValidationError("--shard-size is between 1 and 100000") }
        if let id = self.campaignId, UUID(uuidString: id) == nil { throw ValidationError("--campaign-id must be a UUID, got \"\(id)\"") }
        if let collapse = self.collapseId, collapse.utf8.count > 64 { throw ValidationError("--collapse-id is \(collapse.utf8.count) bytes; APNs allows 64") }
        guard !self.topic.isEmpty else { throw ValidationError("--topic must not be empty") }
        if self.protocol == "http2" {
            guard APNsPushType.all.contains(self.pushType) else {
                throw ValidationError("--push-type \(self.pushType) is not one of \(APNsPushType.all.sorted().joined(separator: ", "))")
            }
            // APNs rejects every notification of such a campaign, and the answer
            // (DeviceTokenNotForTopic) would quarantine every token of the audience.
            if let mismatch = APNsPushType.mismatch(topic: self.topic, pushType: self.pushType) {
                throw ValidationError("--topic and --push-type do not match: \(mismatch)")
            }
        }
    }

    func run() async throws {
        self.log.bootstrap()
        let binary = self.protocol == "binary"
        let format: PayloadFormat = binary ? .binaryFrame : .http2(pushType: self.pushType)
        let payload = try PayloadOption.load(self.payload, format: format)
        let reader = try self.tokens.map { try TokenFileReader(path: $0) }
        let logger = makeLogger("pushfleet.launch")
        let request = Launcher.Request(
            id: self.campaignId.flatMap(UUID.init(uuidString:)), topic: self.topic, environment: self.environment, payload: payload,
            pushType: self.pushType, priority: self.priority, expiration: self.expiration, collapseID: self.collapseId,
            shardSize: self.shardSize, requiredTokenSize: binary ? DeviceToken.binaryProtocolByteCount : nil
        )
        let result = try await self.state.withState(logger: logger) { queue, store in
            let launcher = Launcher(queue: queue, store: store)
            if let reader {
                var source = FileTokenSource(reader: reader, requiredSize: request.requiredTokenSize)
                return try await launcher.launch(request, tokens: &source)
            }
            var source = RegistryTokenSource(store: store, topic: self.topic, environment: self.environment)
            return try await launcher.launch(request, tokens: &source)
        }
        if self.json {
            print("{\"id\":\"\(result.id.uuidString.lowercased())\",\"total\":\(result.total),\"duplicates_dropped\":\(result.duplicatesDropped),\"shards\":\(result.shardCount),\"created\":\(result.created)}")
        } else {
            if !result.created { writeStandardError("campaign \(result.id.uuidString.lowercased()) exists already; nothing changed\n") }
            print(result.id.uuidString.lowercased())
        }
    }
}
