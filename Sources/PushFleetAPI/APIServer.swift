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

    public init(store: CampaignStore, queue: CampaignQueue, logger: Logger) {
        self.store = store
        self.queue = queue
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
        let body = try await Self.body(request, context, limit: Self.smallBodyLimit)
        let fields = try NotificationFields(body)
        try Self.require(key, fields.topic)
        let audience: Notifier.Audience
        switch (body["user"], body["group"], body["tokens"]) {
        case (.string(let user)?, nil, nil): audience = .user(user)
        case (nil, .string(let group)?, nil): audience = .group(group)
        case (nil, nil, .array(let list)?): audience = .tokens(try Self.tokens(list))
        default: throw Self.badRequest("give exactly one of \"user\" (a string), \"group\" (a string) or \"tokens\" (an array of hex strings)")
        }
        let notifier = Notifier(queue: self.queue, store: self.store)
        let result: Notifier.Result
        do {
            result = try await notifier.notify(
                Notifier.Request(
                    id: fields.id, topic: fields.topic, environment: fields.environment, audience: audience, payload: fields.payload,
                    pushType: fields.pushType, priority: fields.priority, expiration: fields.expiration, collapseID: fields.collapseID
                )
            )
        } catch let error as LaunchError {
            throw error.isConflict ? HTTPError(.conflict, message: error.message) : Self.badRequest(error.message)
        }
        let id = result.id.uuidString.lowercased()
        return Self.json(
            result.created ? .accepted : .ok,
            #"{"id":"\#(id)","devices":\#(result.devices),"created":\#(result.created),"href":"/v1/notifications/\#(id)"}"#
        )
    }

    private func notification(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let id = try Self.uuid(context.parameters.get("id"))
        let notFound = HTTPError(.notFound, message: "no notification \(id.uuidString.lowercased())")
        guard let record = try await self.store.campaign(id), record.kind == .notification else { throw notFound }
        try Self.require(key, record.topic)
        guard let report = try await self.store.notificationReport(id) else { throw notFound }
        return Self.json(.ok, NotificationJSON.render(report))
    }

    // MARK: - Devices and groups

    private func putDevice(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let token = try Self.token(context.parameters.get("token") ?? "")
        let body = try await Self.body(request, context, limit: Self.smallBodyLimit)
        let topic = try Self.string(body, "topic")
        try Self.require(key, topic)
        let registeredAt: Date
        if let at = body["registered_at"] {
            guard case .string(let text) = at, let date = try? Date(text, strategy: .iso8601) else {
                throw Self.badRequest("\"registered_at\" must be an ISO 8601 time such as 2026-11-25T08:00:00Z")
            }
            registeredAt = date
        } else {
            registeredAt = Date()
        }
        let registration = DeviceRegistration(
            token: token, topic: topic, environment: try Self.optionalString(body, "environment") ?? "production",
            user: try Self.string(body, "user"), platform: try Self.optionalString(body, "platform"), registeredAt: registeredAt
        )
        let registered = try await Self.refusingBadInput { try await self.store.registerDevice(registration) }
        let fields = [
            #""token":"\#(token.hexString)""#, #""status":"\#(registered.status.rawValue)""#,
            #""owner":\#(Self.quoted(registered.owner))"#,
            #""previous_owner":\#(registered.previousOwner.map(Self.quoted) ?? "null")"#,
        ]
        return Self.json(.ok, "{" + fields.joined(separator: ",") + "}")
    }

    private func deleteDevice(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let token = try Self.token(context.parameters.get("token") ?? "")
        guard let topic = request.uri.queryParameters.get("topic"), !topic.isEmpty else {
            throw Self.badRequest("name the device's app: DELETE /v1/devices/{token}?topic=…&environment=…")
        }
        try Self.require(key, topic)
        let environment = request.uri.queryParameters.get("environment") ?? "production"
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
        let body = try await Self.body(request, context, limit: Self.smallBodyLimit)
        guard case .array(let list)? = body["users"] else { throw Self.badRequest("\"users\" must be an array of user ids") }
        let users = try list.map { value -> String in
            guard case .string(let user) = value else { throw Self.badRequest("\"users\" must be an array of user ids (strings)") }
            return user
        }
        try await Self.refusingBadInput { try await self.store.setGroupMembers(group, users: users) }
        return Self.json(.ok, #"{"group":\#(Self.quoted(group)),"users":[\#(users.sorted().map(Self.quoted).joined(separator: ","))]}"#)
    }

    // MARK: - Campaigns

    private func createCampaign(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let body = try await Self.body(request, context, limit: Self.campaignBodyLimit)
        let fields = try NotificationFields(body)
        try Self.require(key, fields.topic)
        let shardSize = try Self.optionalInteger(body, "shard_size") ?? 1_000
        guard (1...100_000).contains(shardSize) else { throw Self.badRequest("\"shard_size\" is between 1 and 100000") }
        let launcher = Launcher(queue: self.queue, store: self.store)
        let launch = Launcher.Request(
            id: fields.id, topic: fields.topic, environment: fields.environment, payload: fields.payload, pushType: fields.pushType,
            priority: fields.priority, expiration: fields.expiration, collapseID: fields.collapseID, shardSize: shardSize
        )
        let result: Launcher.Result
        do {
            switch (body["tokens"], body["from_registry"]) {
            case (.array(let list)?, nil), (.array(let list)?, .bool(false)?):
                var source = ArrayTokenSource(try Self.tokens(list))
                result = try await launcher.launch(launch, tokens: &source)
            case (nil, .bool(true)?):
                var source = RegistryTokenSource(store: self.store, topic: fields.topic, environment: fields.environment)
                result = try await launcher.launch(launch, tokens: &source)
            default:
                throw Self.badRequest("give \"tokens\" (an array of hex strings) or \"from_registry\": true")
            }
        } catch let error as LaunchError {
            throw error.isConflict ? HTTPError(.conflict, message: error.message) : Self.badRequest(error.message)
        }
        let id = result.id.uuidString.lowercased()
        return Self.json(
            result.created ? .created : .ok,
            #"{"id":"\#(id)","total":\#(result.total),"duplicates_dropped":\#(result.duplicatesDropped),"shards":\#(result.shardCount),"created":\#(result.created),"href":"/v1/campaigns/\#(id)"}"#
        )
    }

    private func campaign(_ request: Request, _ context: BasicRequestContext) async throws -> Response {
        let key = try await self.authenticate(request)
        let id = try Self.uuid(context.parameters.get("id"))
        guard let record = try await self.store.campaign(id) else { throw HTTPError(.notFound, message: "no campaign \(id.uuidString.lowercased())") }
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
        guard let key = try await self.store.authenticate(bearer: bearer) else { throw unauthorized }
        return key
    }

    /// 403 unless `key` may act on `topic`.
    private static func require(_ key: APIKey, _ topic: String) throws {
        guard key.allows(topic) else { throw HTTPError(.forbidden, message: "the API key \(key.id) is not for topic \(topic)") }
    }

    /// The body as JSON; 400 naming where it is not JSON, 413 over `limit` bytes.
    static func body(_ request: Request, _ context: BasicRequestContext, limit: Int) async throws -> JSONValue {
        var request = request
        let buffer = try await request.collectBody(upTo: limit)
        do {
            return try JSONParser.parse(buffer.readableBytesView)
        } catch {
            throw Self.badRequest("the body is not JSON: \(error)")
        }
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

    static func quoted(_ text: String) -> String { StatusReport.quote(text) }

    static func uuid(_ text: String?) throws -> UUID {
        guard let text, let id = UUID(uuidString: text) else { throw Self.badRequest("\(text ?? "the id") is not a UUID") }
        return id
    }

    static func token(_ hex: String) throws -> DeviceToken {
        do {
            return try DeviceToken(hex: hex)
        } catch {
            throw Self.badRequest("device token \(hex.prefix(80)): \(error)")
        }
    }

    static func tokens(_ list: [JSONValue]) throws -> [DeviceToken] {
        try list.enumerated().map { offset, value in
            guard case .string(let hex) = value else { throw Self.badRequest("\"tokens\"[\(offset)] is not a string") }
            do {
                return try DeviceToken(hex: hex)
            } catch {
                throw Self.badRequest("\"tokens\"[\(offset)]: \(error)")
            }
        }
    }

    static func string(_ body: JSONValue, _ name: String) throws -> String {
        guard let value = try Self.optionalString(body, name) else { throw Self.badRequest("\"\(name)\" is missing") }
        return value
    }

    static func optionalString(_ body: JSONValue, _ name: String) throws -> String? {
        switch body[name] {
        case nil, .null?: return nil
        case .string(let value)?: return value
        default: throw Self.badRequest("\"\(name)\" must be a string")
        }
    }

    static func optionalInteger(_ body: JSONValue, _ name: String) throws -> Int? {
        switch body[name] {
        case nil, .null?: return nil
        case .number(let text)?:
            guard let value = Int(text) else { throw Self.badRequest("\"\(name)\" must be an integer, not \(text)") }
            return value
        default: throw Self.badRequest("\"\(name)\" must be a number")
        }
    }
}

/// The fields `POST /v1/notify` and `POST /v1/campaigns` share, checked as `launch` checks its
/// options: the topic, environment, payload (against APNs' limit for its push type) and headers.
struct NotificationFields {
    var id: UUID?
    var topic: String
    var environment: String
    var payload: Payload
    var pushType: String
    var priority: Int
    var expiration: Int
    var collapseID: String?

    init(_ body: JSONValue) throws {
        guard case .object = body else { throw APIServer.badRequest("the body must be a JSON object") }
        self.id = try APIServer.optionalString(body, "id").map { try APIServer.uuid($0) }
        self.topic = try APIServer.string(body, "topic")
        guard !self.topic.isEmpty else { throw APIServer.badRequest("\"topic\" must not be empty") }
        self.environment = try APIServer.optionalString(body, "environment") ?? "production"
        guard ["production", "sandbox"].contains(self.environment) else { throw APIServer.badRequest("\"environment\" is production or sandbox") }
        self.pushType = try APIServer.optionalString(body, "push_type") ?? "alert"
        guard APNsPushType.all.contains(self.pushType) else {
            throw APIServer.badRequest("\"push_type\" \(self.pushType) is not one of \(APNsPushType.all.sorted().joined(separator: ", "))")
        }
        if let mismatch = APNsPushType.mismatch(topic: self.topic, pushType: self.pushType) {
            throw APIServer.badRequest("\"topic\" and \"push_type\" do not match: \(mismatch)")
        }
        self.priority = try APIServer.optionalInteger(body, "priority") ?? 10
        guard [10, 5, 1].contains(self.priority) else { throw APIServer.badRequest("\"priority\" is 10, 5 or 1") }
        self.expiration = try APIServer.optionalInteger(body, "expiration") ?? 0
        self.collapseID = try APIServer.optionalString(body, "collapse_id")
        if let collapse = self.collapseID, collapse.utf8.count > 64 {
            throw APIServer.badRequest("\"collapse_id\" is \(collapse.utf8.count) bytes; APNs allows 64")
        }
        guard let payload = body["payload"] else { throw APIServer.badRequest("\"payload\" is missing") }
        do {
            self.payload = try Payload(payload, format: .http2(pushType: self.pushType))
        } catch {
            throw APIServer.badRequest("\"payload\": \(error)")
        }
    }
}
