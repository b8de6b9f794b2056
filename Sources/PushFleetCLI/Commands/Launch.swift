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

            An audience may carry fields per recipient: CSV whose first line names the columns \
            (one of them 'token'), or JSON lines ({"token":"…","locale":"fr","time_zone":"Europe/Paris"}). \
            --localized picks each recipient's payload by its locale, --local-time its start by its \
            time zone; the campaign is then launched in parts, one campaign each, under the printed \
            id, which status and campaign take for all of them.
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

    @Option(help: "A payload for recipients of a locale, LOCALE=PAYLOAD (PAYLOAD as for --payload); repeat for each locale. A recipient gets the payload of its locale (fr_CA, then fr), else --payload.")
    var localized: [String] = []

    @Option(help: "The audience field that holds a recipient's locale.")
    var localeField = "locale"

    @Option(help: "Deliver to each recipient at this time (HH:MM) of its own time zone: the first such time from now, so the campaign rolls across the world over the next 24 hours.")
    var localTime: String?

    @Option(help: "The audience field that holds a recipient's time zone (an IANA name such as Europe/Paris).")
    var zoneField = "time_zone"

    @Option(help: "The time zone of recipients whose audience line names none (with --local-time). Default: such a recipient fails the launch.")
    var defaultZone: String?

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
        guard self.localized.isEmpty || self.variant.isEmpty else {
            throw ValidationError("--localized and --variant do not go together: a split test's variants have one payload each")
        }
        if !self.localized.isEmpty, self.notification.payload == nil {
            throw ValidationError("--localized needs --payload too: the payload of recipients of every other locale")
        }
        guard (self.notification.payload == nil) != self.variant.isEmpty else {
            throw ValidationError("Give --payload, or a --variant for each variant of a split test (one of them).")
        }
        for text in self.variant { _ = try Self.parseVariant(text) }
        for text in self.localized { _ = try Self.parseLocalized(text) }
        if let time = self.localTime {
            guard LocalTimePlanner(time, now: Date()) != nil else { throw ValidationError("--local-time is HH:MM, 00:00 to 23:59, not \"\(time)\"") }
            guard self.at == nil else { throw ValidationError("--at and --local-time do not go together: give one start, or one per time zone") }
        }
        if let zone = self.defaultZone, TimeZone(identifier: zone) == nil {
            throw ValidationError("--default-zone is an IANA time zone such as Europe/Paris, not \"\(zone)\"")
        }
    }

    func run() async throws {
        self.log.bootstrap()
        let n = self.notification
        let logger = makeLogger("pushfleet.launch")
        let variants = try self.variant.map { text in
            let (name, payload, weight) = try Self.parseVariant(text)
            return SplitTest.Variant(
                name: name, payload: try PayloadOption.load(payload, format: n.payloadFormat, option: "--variant \(name)"), weight: weight
            )
        }
        let payload = try variants.first?.payload ?? n.loadPayload()
        var request = Launcher.Request(
            id: self.campaignId.flatMap(UUID.init(uuidString:)), definition: n.definition(payload: payload), shardSize: self.shardSize,
            requiredTokenSize: n.requiredTokenSize
        )
        request.definition.rateLimit = self.rate
        request.startsAt = self.at.flatMap(Self.parseTime)
        let template = try variants.isEmpty ? self.template(of: payload, option: "--payload") : nil
        for variant in variants { _ = try self.template(of: variant.payload, option: "--variant \(variant.name)") }
        if let plan = try self.plan(variants: variants, payload: payload, request: &request) {
            // The launch's id before its parts are launched: one that dies half way is finished by
            // launching again with it.
            let id = request.id!
            if self.campaignId == nil {
                writeStandardError("launch \(id.uuidString.lowercased()): if it is interrupted, run it again with --campaign-id \(id.uuidString.lowercased())\n")
            }
            let result = try await self.state.withState(logger: logger) { queue, store in
                let launcher = PartitionedLauncher(launcher: Launcher(queue: queue, store: store))
                if let path = self.tokens {
                    // A CSV audience must have the columns the plan reads.
                    // and a column for each placeholder of its payloads.
                    let templateFields = FilePlannedTokenSource.fields(of: plan.payloads.all)
                    let required = (self.localized.isEmpty ? [] : [self.localeField]) + (self.localTime == nil ? [] : [self.zoneField]) + templateFields
                    let fields = [self.localeField, self.zoneField] + templateFields
                    let reader = try TokenFileReader(path: path, fields: fields, required: Set(required))
                    let tokens = FileTokenSource(reader: reader, requiredSize: request.requiredTokenSize, progress: FileProgress(reader))
                    var source = FilePlannedTokenSource(tokens, plan: plan, format: n.payloadFormat)
                    return try await launcher.launch(request, recipients: &source)
                }
                var source = RegistryPlannedTokenSource(store: store, topic: n.topic, environment: n.environment, plan: plan)
                return try await launcher.launch(request, recipients: &source)
            }
            self.print(result, variants: variants)
            return
        }
        // A template's fields are read from the audience; a CSV must have a column for each.
        let fields = template?.fields ?? []
        let reader = try self.tokens.map { try TokenFileReader(path: $0, fields: fields, required: Set(fields)) }
        request.definition.personalized = template != nil
        let result = try await self.state.withState(logger: logger) { queue, store in
            let launcher = Launcher(queue: queue, store: store)
            // A file is read, parsed and packed a batch ahead while the launcher files the last.
            if let reader, let template {
                let tokens = FileTokenSource(reader: reader, requiredSize: request.requiredTokenSize, progress: FileProgress(reader))
                var source = PrefetchingTokenSource(PersonalizedFileTokenSource(tokens, template: template, format: n.payloadFormat))
                return try await launcher.launch(request, tokens: &source)
            }
            if let reader {
                var source = PrefetchingTokenSource(FileTokenSource(reader: reader, requiredSize: request.requiredTokenSize, progress: FileProgress(reader)))
                return try await launcher.launch(request, tokens: &source)
            }
            var source = RegistryTokenSource(store: store, topic: n.topic, environment: n.environment)
            return try await launcher.launch(request, tokens: &source)
        }
        if self.json {
            Swift.print(result.json())
        } else {
            if !result.created { writeStandardError("campaign \(result.id.uuidString.lowercased()) exists already; nothing changed\n") }
            Swift.print(result.id.uuidString.lowercased())
        }
    }

    /// The template of a payload with placeholders (`{{first_name}}`), rendered per recipient from
    /// the fields of its audience line; nil for a payload without.
    /// - Throws: ``CLIError`` naming the option for a bad placeholder, or for a template without
    ///   an audience file (only a file carries fields).
    private func template(of payload: Payload, option: String) throws -> PayloadTemplate? {
        let template: PayloadTemplate?
        do {
            template = try PayloadTemplate(payload.bytes)
        } catch {
            throw CLIError("\(option): \(error)")
        }
        guard template != nil, self.tokens == nil else { return template }
        throw CLIError("\(option) is a template ({{…}}), rendered from each recipient's fields: give --tokens with an audience of CSV or JSON lines")
    }

    /// The plan of a launch in parts (a split test, localized payloads, local time), with the
    /// launch's id set in `request`; nil for a launch of one campaign. `payload` is the launch's
    /// own (the fallback of localized ones).
    private func plan(variants: [SplitTest.Variant], payload: Payload, request: inout Launcher.Request) throws -> LaunchPlan? {
        guard !variants.isEmpty || !self.localized.isEmpty || self.localTime != nil else { return nil }
        let id = request.id ?? UUID()
        request.id = id
        let payloads: LaunchPlan.Payloads
        if !variants.isEmpty {
            payloads = try SplitTest.payloads(variants, id: id)
        } else if !self.localized.isEmpty {
            let format = self.notification.payloadFormat
            let locales = try self.localized.map(Self.parseLocalized)
            guard Set(locales.map { LocaleChooser.normalized($0.locale) }).count == locales.count else {
                throw CLIError("two --localized payloads are for the same locale")
            }
            let localized = try locales.map { try PayloadOption.load($0.payload, format: format, option: "--localized \($0.locale)") }
            for (locale, payload) in zip(locales, localized) { _ = try self.template(of: payload, option: "--localized \(locale.locale)") }
            payloads = .localized(LocaleChooser(locales: locales.map(\.locale)), payloads: localized, fallback: payload)
        } else {
            payloads = .one(payload)
        }
        return LaunchPlan(
            payloads: payloads, localTime: self.localTime.flatMap { LocalTimePlanner($0, now: Date()) },
            defaultZone: self.defaultZone.flatMap(TimeZone.init(identifier:))
        )
    }

    private func print(_ result: PartitionedLauncher.Result, variants: [SplitTest.Variant]) {
        let id = result.id.uuidString.lowercased()
        if self.json {
            Swift.print(result.json(variants: variants))
        } else {
            if !result.created { writeStandardError("launch \(id) exists already; nothing changed\n") }
            for p in result.parts {
                let start = p.part.startsAt.map { ", starts \(StatusReport.timestamp($0))" } ?? ""
                writeStandardError("part \(p.part.name): campaign \(p.launch.id.uuidString.lowercased()), \(p.launch.total) tokens\(start)\n")
            }
            Swift.print(id)
        }
    }

    /// `LOCALE=PAYLOAD`.
    static func parseLocalized(_ text: String) throws -> (locale: String, payload: String) {
        guard let equals = text.firstIndex(of: "="), equals != text.startIndex,
            text[..<equals].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") })
        else {
            throw ValidationError("--localized is LOCALE=PAYLOAD (a locale such as fr or pt-BR; PAYLOAD JSON text or @FILE), such as fr=@fr.json, not \"\(text)\"")
        }
        let locale = String(text[..<equals])
        guard LocaleChooser.normalized(locale) != LaunchPlan.fallbackName else {
            throw ValidationError("--localized cannot name the locale \"\(locale)\": '\(LaunchPlan.fallbackName)' is the part of --payload's recipients")
        }
        return (locale, String(text[text.index(after: equals)...]))
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
