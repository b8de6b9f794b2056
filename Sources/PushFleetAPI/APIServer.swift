public import Hummingbird
public import Logging
public import PushFleetPostgres
public import PushFleetRedis
import Foundation
public import NIOCore
public import NIOPosix
import PushFleetCore
import PushFleetServices

/// `pushfleet api`: the HTTP API over the same lane, launcher and registry as the CLI.
///
/// Every `/v1` request carries `authorization: Bearer pf_<id>_<secret>` (``CampaignStore/createAPIKey(topics:label:)``):
/// without a valid key it gets 401, with a key of other topics 403, and nothing is changed
/// either way. Bodies are JSON; bad JSON, a missing field or a payload over APNs' limit gets 400
/// naming the reason, before anything is written. Errors are `{"error":{"message":"…"}}`.
public struct APIServer: Sendable {
    public let store: CampaignStore
    public let queue: CampaignQueue
    public let logger: Logger

    /// The largest request body of `/v1/notify` (10,000 tokens of 32 bytes in hex, and the
    /// payload) and the device and group calls.
    static let smallBodyLimit = 1024 * 1024
    /// The largest `POST /v1/campaigns` body: some 200,000 tokens in hex. The body is parsed whole,
    /// so larger audiences go through `pushfleet launch` or `from_registry`.
    static let campaignBodyLimit = 16 * 1024 * 1024

    /// Keys accepted within the cache's lifetime, taken on trust.
    let keys: APIKeyCache

    /// A server over `store` and `queue`; an accepted key is taken on trust for `keyCacheLifetime`
    /// (a revocation reaches this server within that time; zero checks every request).
    public init(store: CampaignStore, queue: CampaignQueue, keyCacheLifetime: Duration = .zero, logger: Logger) {
        self.store = store
        self.queue = queue
        self.keys = APIKeyCache(lifetime: keyCacheLifetime)
        self.logger = logger
    }

    /// The routes, for an ``Application`` or a test.
    public func router() -> Router<BasicRequestContext> {
        let router = Router(context: BasicRequestContext.self)
        router.get("/healthz") { _, _ in "ok\n" }
        router.get("/openapi.json") { _, _ in Self.json(.ok, OpenAPIDocument.json) }
        router.get("/") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(string: Dashboard.page)))
        }
        let dashboard = Dashboard.Cache()
        router.get("/dashboard.json") { _, _ in Self.json(.ok, try await dashboard.json(store: self.store, queue: self.queue)) }
        let v1 = router.group("v1")
        v1.post("notify") { request, context in try await self.notify(request, context) }
        v1.get("notifications/:id") { request, context in try await self.notification(request, context) }
        v1.put("devices/:token") { request, context in try await self.putDevice(request, context) }
        v1.delete("devices/:token") { request, context in try await self.deleteDevice(request, context) }
        v1.put("groups/:id/members") { request, context in try await self.putMembers(request, context) }
        v1.post("campaigns") { request, context in try await self.createCampaign(request, context) }
        v1.get("campaigns/:id") { request, context in try await self.campaign(request, context) }
        return router
    }

    /// The server on `host:port`, on `group`'s event loops; `onRunning` hears the port it bound
    /// (for port 0).
    public func application(
        host: String, port: Int, group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: self.router(),
            configuration: .init(address: .hostname(host, port: port), serverName: "pushfleet"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            eventLoopGroupProvider: .shared(group),
            logger: self.logger
        )
    }

    // MARK: - Notifications

    private func notify(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let body = try await Self.decode(request, context, limit: Self.smallBodyLimit, as: NotifyBody.init)
        let fields = body.fields
        try Self.require(key, fields.topic)
        let audience: Notifier.Audience
        switch body.audience {
        case .user(let user): audience = .user(user)
        case .group(let group): audience = .group(group)
        case .tokens(let tokens): audience = .tokens(tokens)
        }
        let notifier = Notifier(queue: self.queue, store: self.store)
        let result: Notifier.Result
        do {
            result = try await notifier.notify(
                Notifier.Request(id: fields.id, definition: fields.definition, audience: audience)
            )
        } catch let error as LaunchError {
            throw error.isConflict ? HTTPError(.conflict, message: error.message) : Self.badRequest(error.message)
        }
        return Self.json(result.created ? .accepted : .ok, PushFleetJSON.encode(NotifyAnswer(result)))
    }

    private func notification(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let id = try Self.pathID(context)
        let notFound = HTTPError(.notFound, message: "no notification \(id.uuidString.lowercased())")
        guard let record = try await self.store.campaign(id), record.kind == .notification else { throw notFound }
        try Self.require(key, record.topic)
        guard let report = try await self.store.notificationReport(id) else { throw notFound }
        return Self.json(.ok, NotificationJSON.render(report))
    }

    // MARK: - Devices and groups

    private func putDevice(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let token = try Self.pathToken(context)
        let body = try await Self.decode(request, context, limit: Self.smallBodyLimit, as: DeviceBody.init)
        try Self.require(key, body.topic)
        let registration = DeviceRegistration(
            token: token, topic: body.topic, environment: body.environment, user: body.user, platform: body.platform,
            registeredAt: body.registeredAt ?? Date(), locale: body.locale, timeZone: body.timeZone
        )
        let registered = try await Self.refusingBadInput { try await self.store.registerDevice(registration) }
        let answer = DeviceAnswer(
            token: token.hexString, status: registered.status.rawValue, owner: registered.owner, previousOwner: registered.previousOwner
        )
        return Self.json(.ok, PushFleetJSON.encode(answer))
    }

    private func deleteDevice(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let token = try Self.pathToken(context)
        guard let topic = request.uri.queryParameters.get("topic"), !topic.isEmpty else {
            throw Self.badRequest("name the device's app: DELETE /v1/devices/{token}?topic=…&environment=…")
        }
        try Self.require(key, topic)
        let environment: APNsEnvironment
        do throws(APIInputError) {
            environment = try APIBody.environment(request.uri.queryParameters.get("environment"), "environment")
        } catch {
            throw Self.badRequest(error.message)
        }
        let removed = try await Self.refusingBadInput { try await self.store.removeDevice(token, topic: topic, environment: environment) }
        guard removed else { throw HTTPError(.notFound, message: "no device \(token.hexString) for \(topic) (\(environment))") }
        return Response(status: .noContent)
    }

    private func putMembers(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        // A group is shared by every app (its members' devices of each topic ring): only a key for
        // every topic may change one.
        guard key.allowsEveryTopic else {
            throw HTTPError(.forbidden, message: "the API key \(key.id) is for some topics only; setting a group's members needs a key for every topic (--topic '*')")
        }
        let group = context.parameters.get("id") ?? ""
        let users = try await Self.decode(request, context, limit: Self.smallBodyLimit, as: GroupMembersBody.init).users
        try await Self.refusingBadInput { try await self.store.setGroupMembers(group, users: users) }
        return Self.json(.ok, PushFleetJSON.encode(GroupAnswer(group: group, users: users.sorted())))
    }

    // MARK: - Campaigns

    private func createCampaign(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let body = try await Self.decode(request, context, limit: Self.campaignBodyLimit, as: CampaignBody.init)
        let fields = body.fields
        try Self.require(key, fields.topic)
        let launcher = Launcher(queue: self.queue, store: self.store)
        var launch = Launcher.Request(id: fields.id, definition: fields.definition, shardSize: body.shardSize)
        launch.definition.rateLimit = body.rateLimit
        launch.startsAt = body.startsAt
        // A template is rendered from each recipient's fields: only "recipients" carry them.
        var templates = false
        for payload in [fields.payload] + body.variants.map(\.payload) + body.localized.map(\.payload) {
            do {
                templates = try PayloadTemplate(payload.bytes) != nil || templates
            } catch {
                throw Self.badRequest("a payload's placeholders: \(error)")
            }
        }
        if templates {
            guard case .recipients = body.audience else {
                throw Self.badRequest("a payload with placeholders ({{…}}) is rendered from each recipient's fields: give \"recipients\" with them")
            }
        }
        if !body.variants.isEmpty || !body.localized.isEmpty || body.localTime != nil { return try await self.createInParts(launch, fields.payload, body) }
        let result: Launcher.Result
        do {
            switch body.audience {
            case .tokens(let tokens):
                var source = ArrayTokenSource(tokens)
                result = try await launcher.launch(launch, tokens: &source)
            case .recipients(let recipients):
                if let template = try PayloadTemplate(fields.payload.bytes) {
                    launch.definition.personalized = true
                    var source = RecipientsTokenSource(recipients: recipients, template: template, format: fields.payload.format)
                    result = try await launcher.launch(launch, tokens: &source)
                } else {
                    var source = ArrayTokenSource(recipients.map(\.token))
                    result = try await launcher.launch(launch, tokens: &source)
                }
            case .registry:
                var source = RegistryTokenSource(store: self.store, topic: fields.topic, environment: fields.environment)
                result = try await launcher.launch(launch, tokens: &source)
            }
        } catch let error as LaunchError {
            throw error.isConflict ? HTTPError(.conflict, message: error.message) : Self.badRequest(error.message)
        }
        return Self.json(result.created ? .created : .ok, result.json(href: "/v1/campaigns/\(result.id.uuidString.lowercased())"))
    }

    /// `POST /v1/campaigns` with `variants`, `localized` or `local_time`: a launch in parts, as
    /// `launch --variant`, `--localized` and `--local-time` make it.
    /// `payload` is the launch's own (the fallback of localized ones).
    private func createInParts(_ launch: Launcher.Request, _ payload: Payload, _ body: CampaignBody) async throws -> Response {
        var launch = launch
        let id = launch.id ?? UUID()
        launch.id = id
        let variants = body.variants.map { SplitTest.Variant(name: $0.name, payload: $0.payload, weight: $0.weight) }
        let result: PartitionedLauncher.Result
        do {
            let payloads: LaunchPlan.Payloads
            if !variants.isEmpty {
                payloads = try SplitTest.payloads(variants, id: id)
            } else if !body.localized.isEmpty {
                guard Set(body.localized.map { LocaleChooser.normalized($0.locale) }).count == body.localized.count else {
                    throw Self.badRequest("\"localized\" names one locale twice")
                }
                payloads = .localized(LocaleChooser(locales: body.localized.map(\.locale)), payloads: body.localized.map(\.payload), fallback: payload)
            } else {
                payloads = .one(payload)
            }
            var localTime: LocalTimePlanner? = nil
            if let time = body.localTime {
                guard let planner = LocalTimePlanner(time, now: Date()) else { throw Self.badRequest("\"local_time\" is HH:MM, 00:00 to 23:59, not \(time)") }
                localTime = planner
            }
            let plan = LaunchPlan(payloads: payloads, localTime: localTime, defaultZone: body.defaultZone)
            let launcher = PartitionedLauncher(launcher: Launcher(queue: self.queue, store: self.store))
            switch body.audience {
            case .tokens(let tokens):
                var source = PlainPlannedTokenSource(ArrayTokenSource(tokens), plan: plan)
                result = try await launcher.launch(launch, recipients: &source)
            case .recipients(let recipients):
                var source = RecipientsPlannedTokenSource(recipients: recipients, plan: plan)
                result = try await launcher.launch(launch, recipients: &source)
            case .registry:
                var source = RegistryPlannedTokenSource(store: self.store, topic: launch.definition.topic, environment: launch.definition.environment, plan: plan)
                result = try await launcher.launch(launch, recipients: &source)
            }
        } catch let error as LaunchError {
            throw error.isConflict ? HTTPError(.conflict, message: error.message) : Self.badRequest(error.message)
        }
        return Self.json(result.created ? .created : .ok, result.json(variants: variants, href: "/v1/campaigns/\(result.id.uuidString.lowercased())"))
    }

    private func campaign(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let id = try Self.pathID(context)
        let notFound = HTTPError(.notFound, message: "no campaign \(id.uuidString.lowercased())")
        guard let record = try await self.store.campaign(id) else {
            // A split test's id: its variants side by side.
            let variants = try await self.store.variants(of: id)
            guard let first = variants.first else { throw notFound }
            try Self.require(key, first.topic)
            return Self.json(.ok, SplitReport(id: id, variants: variants).json)
        }
        try Self.require(key, record.topic)
        return Self.json(.ok, StatusReport(record: record).json)
    }

    // MARK: - Keys, bodies, answers

    /// The request's key; 401 without a valid one.
    private func authenticate(_ request: Request) async throws -> APIKey {
        let unauthorized = HTTPError(
            .unauthorized, headers: [.wwwAuthenticate: "Bearer"], message: "send a valid API key: authorization: Bearer pf_…"
        )
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") else { throw unauthorized }
        let bearer = header.dropFirst("bearer ".count).trimmingCharacters(in: .whitespaces)
        guard let key = try await self.keys.key(for: bearer, lookup: self.store.authenticate(bearer:)) else { throw unauthorized }
        return key
    }

    /// 403 unless `key` may act on `topic`.
    private static func require(_ key: APIKey, _ topic: String) throws {
        guard key.allows(topic) else { throw HTTPError(.forbidden, message: "the API key \(key.id) is not for topic \(topic)") }
    }

    /// The body as JSON, decoded by `decode` (one of the body types in Requests/); 400 naming
    /// where it is not JSON or what `decode` refused, 413 over `limit` bytes.
    static func decode<Body>(
        _ request: Request, _ context: BasicRequestContext, limit: Int, as decode: (JSONValue) throws(APIInputError) -> Body
    ) async throws -> Body {
        var request = request
        let buffer = try await request.collectBody(upTo: limit)
        let json: JSONValue
        do {
            json = try JSONParser.parse(buffer.readableBytesView)
        } catch {
            throw Self.badRequest("the body is not JSON: \(error)")
        }
        return try Self.input { () throws(APIInputError) in try decode(json) }
    }

    /// What `body` returns; its ``APIInputError`` as 400.
    static func input<T>(_ body: () throws(APIInputError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw Self.badRequest(error.message)
        }
    }

    /// The path's `{id}`; 400 unless a UUID.
    static func pathID(_ context: BasicRequestContext) throws -> UUID {
        try Self.input { () throws(APIInputError) in try APIBody.uuid(context.parameters.get("id")) }
    }

    /// The path's `{token}`; 400 unless a device token in hex.
    static func pathToken(_ context: BasicRequestContext) throws -> DeviceToken {
        try Self.input { () throws(APIInputError) in try APIBody.token(context.parameters.get("token") ?? "") }
    }

    static func badRequest(_ message: String) -> HTTPError { HTTPError(.badRequest, message: message) }

    /// Store errors about the input (an unknown platform, an empty user id) become 400.
    static func refusingBadInput<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresStoreError where error.code == .invalidInput {
            throw Self.badRequest(error.message)
        }
    }

    static func json(_ status: HTTPResponse.Status, _ text: String) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: text + "\n")))
    }
}

/// The recipients of a `POST /v1/campaigns` body, planned by their tokens, locales and zones;
/// errors name the recipient's place in the body.
struct RecipientsPlannedTokenSource: PlannedTokenSource {
    let recipients: [RecipientBody]
    private(set) var plan: LaunchPlan
    private(set) var batchValues: RecipientValueList?
    private var next = 0
    /// Each part's template, as parts are made.
    private var templates: [PayloadTemplate?] = []

    init(recipients: [RecipientBody], plan: LaunchPlan) {
        self.recipients = recipients
        self.plan = plan
    }

    mutating func next(upTo maximum: Int) async throws -> [(token: DeviceToken, part: Int)] {
        let (start, end) = (self.next, min(self.recipients.count, self.next + maximum))
        self.next = end
        let planned = try self.plan.parts(of: self.recipients[start..<end].map { ($0.token, $0.locale, $0.zone) }) { index, error in
            HTTPError(.badRequest, message: "\"recipients\"[\(start + index)]: \(error)")
        }
        while self.templates.count < self.plan.parts.count { self.templates.append(self.plan.parts[self.templates.count].template) }
        guard self.templates.contains(where: { $0 != nil }) else { return planned }
        var values = RecipientValueList()
        for (index, recipient) in planned.enumerated() {
            guard let template = self.templates[recipient.part] else {
                values.append([])
                continue
            }
            let format = self.plan.parts[recipient.part].payload.format
            try RecipientsTokenSource.append(to: &values, self.recipients[start + index], index: start + index, template, format)
        }
        self.batchValues = values
        return planned
    }
}

/// The recipients of `POST /v1/campaigns` with the values of its payload template.
struct RecipientsTokenSource: TokenSource {
    let recipients: [RecipientBody]
    let template: PayloadTemplate
    let format: PayloadFormat
    private(set) var batchValues: RecipientValueList? = RecipientValueList()
    private var next = 0

    init(recipients: [RecipientBody], template: PayloadTemplate, format: PayloadFormat) {
        self.recipients = recipients
        self.template = template
        self.format = format
    }

    mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let (start, end) = (self.next, min(self.recipients.count, self.next + maximum))
        self.next = end
        var values = RecipientValueList()
        for index in start..<end { try Self.append(to: &values, self.recipients[index], index: index, self.template, self.format) }
        self.batchValues = values
        return self.recipients[start..<end].map(\.token)
    }

    /// Appends the packed values of recipient `index` to `list`; a refusal names it.
    static func append(to list: inout RecipientValueList, _ recipient: RecipientBody, index: Int, _ template: PayloadTemplate, _ format: PayloadFormat) throws {
        let fields = template.fields
        do {
            try RecipientValues.append(to: &list, template, format: format) { try recipient.field(fields[$0]) }
        } catch {
            throw HTTPError(.badRequest, message: "\"recipients\"[\(index)]: \(error)")
        }
    }
}
