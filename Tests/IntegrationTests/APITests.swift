import Foundation
import PushFleetAPI
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetServices
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `pushfleet api` as a process on the test Redis and Postgres: keys, refusals that change
/// nothing, devices and groups, a notification taken and reported, and the OpenAPI document
/// against the routes. Sending is the pipeline suite's (`PipelineDoorbellTests`).
@Suite struct APITests {
    /// A running `pushfleet api` and a store beside it.
    struct Server {
        let process: PushFleetProcess
        let port: Int

        static func start() async throws -> Server {
            // The suites run side by side: another test may bind the free port first. Then the
            // server exits at once, and another port is tried.
            for attempt in 1...5 {
                let port = try FreePort.take()
                let process = try PushFleetProcess(
                    ["api", "--host", "127.0.0.1", "--port", "\(port)", "--redis", try IntegrationEnvironment.redisURL(),
                     "--postgres", try IntegrationEnvironment.postgresURL()]
                )
                if try await Self.waitUntilHealthy(process, port: port, portTakenIsFinal: attempt == 5) {
                    return Server(process: process, port: port)
                }
            }
            throw CancellationError()  // not reached: the fifth attempt succeeds or fails the test
        }

        /// Waits until `pushfleet api` answers `/healthz` on `port`; fails if it exits or takes a
        /// minute. - Returns: false, without failing, when it exited because the port was taken
        /// meanwhile and that is not final.
        @discardableResult
        static func waitUntilHealthy(_ process: PushFleetProcess, port: Int, portTakenIsFinal: Bool = true) async throws -> Bool {
            let start = ContinuousClock.now
            while (try? await LoopbackHTTP.request("GET", port: port, path: "/healthz"))?.status != 200 {
                if !process.isRunning, !portTakenIsFinal {
                    _ = await process.wait()
                    if process.standardError.contains("Address already in use") { return false }
                }
                try #require(process.isRunning, "pushfleet api exited: \(process.standardError.suffix(2_000))")
                try #require(ContinuousClock.now - start < .seconds(60), "pushfleet api never answered /healthz")
                try await Task.sleep(for: .milliseconds(100))
            }
            return true
        }

        func call(_ method: String, _ path: String, key: String? = nil, body: String? = nil) async throws -> LoopbackHTTP.Answer {
            try await LoopbackHTTP.request(method, port: self.port, path: path, bearer: key, body: body)
        }

        func stop() async {
            self.process.signal(SIGTERM)
            #expect(await self.process.wait() == 0, "pushfleet api did not exit cleanly: \(self.process.standardError.suffix(2_000))")
        }
    }

    private static func notifyBody(id: UUID, topic: String, tokens: [DeviceToken], payload: String = #"{"aps":{"alert":"Ding dong"}}"#) -> String {
        #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":[\#(tokens.map { "\"\($0.hexString)\"" }.joined(separator: ","))],"payload":\#(payload)}"#
    }

    @Test func requestsWithoutAValidKeyGet401AndChangeNothing() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-401")
            let (key, bearer) = try await store.createAPIKey(topics: [topic])
            let (_, revokedBearer) = try await store.createAPIKey(topics: [topic])
            #expect(try await store.revokeAPIKey(String(revokedBearer.split(separator: "_")[1])))
            let wrongSecret = bearer.dropLast(4) + "aaaa"
            let id = UUID()
            let token = PostgresFixture.tokens(1)[0]
            for presented in [nil, "nonsense", "pf_\(key.id)_", String(wrongSecret), revokedBearer] {
                let notify = try await server.call("POST", "/v1/notify", key: presented, body: Self.notifyBody(id: id, topic: topic, tokens: [token]))
                #expect(notify.status == 401, "\(presented ?? "no key"): \(notify.body)")
                #expect(notify.headers["www-authenticate"] == "Bearer")
                let device = try await server.call("PUT", "/v1/devices/\(token.hexString)", key: presented, body: #"{"topic":"\#(topic)","user":"u"}"#)
                #expect(device.status == 401)
                #expect(try await server.call("GET", "/v1/campaigns/\(id.uuidString)", key: presented).status == 401)
            }
            #expect(try await store.campaign(id) == nil)
            #expect(try await store.tokenStatus(token, topic: topic, environment: .production) == nil)
        }
        await server.stop()
    }

    @Test func aKeyOfAnotherTopicGets403AndChangesNothing() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let (mine, theirs) = (PostgresFixture.topic("api-mine"), PostgresFixture.topic("api-theirs"))
            let (_, bearer) = try await store.createAPIKey(topics: [mine])
            let token = PostgresFixture.tokens(1)[0]
            let id = UUID()
            let notify = try await server.call("POST", "/v1/notify", key: bearer, body: Self.notifyBody(id: id, topic: theirs, tokens: [token]))
            #expect(notify.status == 403, "\(notify.body)")
            #expect(notify.body.contains(theirs))
            let campaign = try await server.call(
                "POST", "/v1/campaigns", key: bearer,
                body: #"{"id":"\#(id.uuidString)","topic":"\#(theirs)","tokens":["\#(token.hexString)"],"payload":{"aps":{"alert":"x"}}}"#
            )
            #expect(campaign.status == 403)
            let device = try await server.call("PUT", "/v1/devices/\(token.hexString)", key: bearer, body: #"{"topic":"\#(theirs)","user":"u"}"#)
            #expect(device.status == 403)
            #expect(try await server.call("DELETE", "/v1/devices/\(token.hexString)?topic=\(theirs)", key: bearer).status == 403)
            #expect(try await store.campaign(id) == nil)
            #expect(try await store.tokenStatus(token, topic: theirs, environment: .production) == nil)

            // Their campaign's progress is not for this key either.
            let launched = PostgresFixture.campaign(topic: theirs)
            #expect(try await store.createCampaign(launched))
            #expect(try await server.call("GET", "/v1/campaigns/\(launched.id.uuidString)", key: bearer).status == 403)
        }
        await server.stop()
    }

    @Test func badInputGets400WithTheReasonAndChangesNothing() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-400")
            let (_, bearer) = try await store.createAPIKey(topics: [topic])
            let token = PostgresFixture.tokens(1)[0]
            let id = UUID()
            let alert = String(repeating: "a", count: 5_000)
            let cases: [(body: String, reason: String)] = [
                (#"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":["\#(token.hexString)"],"payload":{"aps":{"alert":"x"}"#, "not JSON"),
                (Self.notifyBody(id: id, topic: topic, tokens: [token], payload: #"{"aps":{"alert":"\#(alert)"}}"#), "4096"),
                (#"{"id":"\#(id.uuidString)","topic":"\#(topic)","payload":{"aps":{"alert":"x"}}}"#, "exactly one of"),
                (#"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":["zz"],"payload":{"aps":{"alert":"x"}}}"#, "[0]: 'z' at column 1"),
                (#"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":["\#(token.hexString)"]}"#, "payload\\\" is missing"),
                (#"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":["\#(token.hexString)"],"payload":{"aps":{}},"priority":7}"#, "priority"),
                (#"{"id":"\#(id.uuidString)","topic":"\#(topic)","user":"nobody-\#(id.uuidString)","payload":{"aps":{"alert":"x"}}}"#, "no active device"),
                (#"{"id":"\#(id.uuidString)","topic":"\#(topic)","environment":"staging","tokens":["\#(token.hexString)"],"payload":{"aps":{"alert":"x"}}}"#, "environment\\\" is production or sandbox"),
            ]
            for (body, reason) in cases {
                let answer = try await server.call("POST", "/v1/notify", key: bearer, body: body)
                #expect(answer.status == 400, "\(reason): \(answer.status) \(answer.body)")
                #expect(answer.body.contains(reason), "\(answer.body) does not say \(reason)")
            }
            let campaign = try await server.call(
                "POST", "/v1/campaigns", key: bearer, body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":[],"payload":{"aps":{"alert":"x"}}}"#
            )
            #expect(campaign.status == 400, "\(campaign.body)")
            let throttled = try await server.call(
                "POST", "/v1/campaigns", key: bearer,
                body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":["\#(token.hexString)"],"rate":0,"payload":{"aps":{"alert":"x"}}}"#
            )
            #expect(throttled.status == 400, "\(throttled.body)")
            #expect(throttled.body.contains("rate"), "\(throttled.body)")
            // A template needs an audience file's fields (`pushfleet launch --tokens`).
            for payload in [#"{"aps":{"alert":"Hi {{first_name}}"}}"#, #"{"aps":{"alert":"Hi {{first name}}"}}"#] {
                let template = try await server.call(
                    "POST", "/v1/campaigns", key: bearer,
                    body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":["\#(token.hexString)"],"payload":\#(payload)}"#
                )
                #expect(template.status == 400, "\(template.body)")
                #expect(template.body.contains("placeholders"), "\(template.body)")
            }
            let device = try await server.call(
                "PUT", "/v1/devices/\(token.hexString)", key: bearer, body: #"{"topic":"\#(topic)","user":"u","platform":"amiga"}"#
            )
            #expect(device.status == 400)
            #expect(device.body.contains("amiga"))
            let staging = try await server.call(
                "PUT", "/v1/devices/\(token.hexString)", key: bearer, body: #"{"topic":"\#(topic)","environment":"staging","user":"u"}"#
            )
            #expect(staging.status == 400, "\(staging.body)")
            #expect(staging.body.contains("is production or sandbox"), "\(staging.body)")
            let removal = try await server.call("DELETE", "/v1/devices/\(token.hexString)?topic=\(topic)&environment=staging", key: bearer, body: nil)
            #expect(removal.status == 400, "\(removal.body)")
            #expect(removal.body.contains("environment is production or sandbox"), "\(removal.body)")
            #expect(try await store.campaign(id) == nil)
            #expect(try await store.tokenStatus(token, topic: topic, environment: .production) == nil)
        }
        await server.stop()
    }

    /// A campaign launched with `"rate"` keeps it: Postgres, the queue workers read, and the
    /// progress the API reports.
    @Test func aCampaignLaunchedWithARateKeepsIt() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-rate")
            let (_, bearer) = try await store.createAPIKey(topics: [topic])
            let tokens = PostgresFixture.tokens(3)
            let id = UUID()
            let list = tokens.map { "\"\($0.hexString)\"" }.joined(separator: ",")
            // A start time as JavaScript writes it (milliseconds), an hour ahead.
            let at = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 + 3_600).rounded(.down))
            let written = at.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
            let created = try await server.call(
                "POST", "/v1/campaigns", key: bearer,
                body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"rate":500,"at":"\#(written)","payload":{"aps":{"alert":"x"}}}"#
            )
            #expect(created.status == 201, "\(created.body)")
            #expect(try await store.campaign(id)?.rateLimit == 500)
            #expect(try await store.campaign(id)?.startsAt == at)
            #expect(try await store.campaign(id)?.state == .scheduled)
            let queue = CampaignQueue(client: RedisClient(configuration: try RedisConfiguration(url: try IntegrationEnvironment.redisURL()), logger: silentRedisLogger))
            #expect(try await queue.descriptor(campaign: id)?.definition.rateLimit == 500)
            let progress = try await server.call("GET", "/v1/campaigns/\(id.uuidString)", key: bearer)
            #expect(progress.body.contains(#""rate_limit":500"#), "\(progress.body)")
            _ = try await store.setState(id, to: .cancelled, from: [.scheduled, .running, .pending])
            try await queue.client.shutdown()
        }
        await server.stop()
    }

    /// A personalized campaign through the API: each recipient's members fill the template's
    /// placeholders (a number as written, a missing one its fallback), packed in its shard and
    /// marked for the workers; a recipient whose rendering is too large gets 400 naming it, and
    /// nothing is created.
    @Test func aPersonalizedCampaignThroughTheAPIStoresEachRecipientsValues() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-personalized")
            let (_, bearer) = try await store.createAPIKey(topics: [topic])
            let tokens = PostgresFixture.tokens(3)
            let template = #"{"aps":{"alert":"Hi {{first_name|there}}, {{offer}}% off"}}"#
            let recipients = [
                #"{"token":"\#(tokens[0].hexString)","first_name":"Zoë \"Z\"","offer":20}"#,
                #"{"token":"\#(tokens[1].hexString)","offer":"5"}"#,
                #"{"token":"\#(tokens[2].hexString)","first_name":"","offer":null}"#,
            ]
            let expected = [#"{"aps":{"alert":"Hi Zoë \"Z\", 20% off"}}"#, #"{"aps":{"alert":"Hi there, 5% off"}}"#, #"{"aps":{"alert":"Hi there, % off"}}"#]
            let id = UUID()
            let created = try await server.call(
                "POST", "/v1/campaigns", key: bearer,
                body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","recipients":[\#(recipients.joined(separator: ","))],"payload":\#(template)}"#
            )
            #expect(created.status == 201, "\(created.body)")
            let definition = try #require(try await store.launchedCampaign(id)).definition
            #expect(definition.personalized)
            let stored = try #require(try await store.shardRecipients(campaign: id, shards: [0])[0])
            #expect(stored.tokens == tokens)
            let rendering = try #require(try PayloadTemplate(definition.payload))
            #expect(try #require(stored.values).arrays.map { rendering.render(packed: $0).map { String(decoding: $0, as: UTF8.self) } } == expected)
            _ = try await store.setState(id, to: .cancelled, from: [.scheduled, .running, .pending])

            let big = String(repeating: "x", count: 4_096)
            let refused = UUID()
            let tooLarge = try await server.call(
                "POST", "/v1/campaigns", key: bearer,
                body: #"{"id":"\#(refused.uuidString)","topic":"\#(topic)","recipients":[\#(recipients[0]),{"token":"\#(tokens[1].hexString)","offer":"\#(big)"}],"payload":\#(template)}"#
            )
            #expect(tooLarge.status == 400, "\(tooLarge.body)")
            #expect(tooLarge.body.contains("recipients\\\"[1]: the payload rendered for this recipient is 4131 bytes, 35 over"), "\(tooLarge.body)")
            #expect(try await store.campaign(refused) == nil)
        }
        await server.stop()
    }

    /// A split test through the API: created with `variants`, reported by its id with each
    /// variant side by side; a single variant, or variants beside a payload, get 400.
    @Test func aSplitTestLaunchedThroughTheAPIIsReportedByItsID() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-split")
            let (_, bearer) = try await store.createAPIKey(topics: [topic])
            let list = PostgresFixture.tokens(40).map { "\"\($0.hexString)\"" }.joined(separator: ",")
            let id = UUID()
            let variants = #"[{"name":"A","payload":{"aps":{"alert":"a"}},"weight":1},{"name":"B","payload":{"aps":{"alert":"b"}},"weight":1}]"#
            let created = try await server.call(
                "POST", "/v1/campaigns", key: bearer, body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"variants":\#(variants)}"#
            )
            #expect(created.status == 201, "\(created.body)")
            #expect(created.body.contains(#""split":true"#))
            // The same id again: the variants' ids follow from it, so nothing more is created.
            let again = try await server.call(
                "POST", "/v1/campaigns", key: bearer, body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"variants":\#(variants)}"#
            )
            #expect(again.status == 200, "\(again.body)")
            #expect(again.body.contains(#""created":false"#))
            // Again with other weights: some recipients would get a second variant; refused.
            let reweighted = variants.replacingOccurrences(of: #""weight":1}]"#, with: #""weight":3}]"#)
            let conflict = try await server.call(
                "POST", "/v1/campaigns", key: bearer, body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"variants":\#(reweighted)}"#
            )
            #expect(conflict.status == 409, "\(conflict.body)")
            let records = try await store.variants(of: id)
            #expect(records.map(\.variant) == ["A", "B"])
            #expect(records.reduce(0) { $0 + $1.total } == 40)
            let report = try await server.call("GET", "/v1/campaigns/\(id.uuidString)", key: bearer)
            #expect(report.status == 200)
            #expect(report.body.contains(#""split":true"#) && report.body.contains(#""total":40"#), "\(report.body)")
            for record in records { _ = try await store.setState(record.id, to: .cancelled, from: [.running, .pending]) }

            let other = UUID()
            let bad = [
                #"{"id":"\#(other.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"variants":[{"name":"A","payload":{"aps":{"alert":"a"}},"weight":1}]}"#,
                #"{"id":"\#(other.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"payload":{"aps":{"alert":"x"}},"variants":\#(variants)}"#,
                #"{"id":"\#(other.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"variants":[{"name":"A","payload":{"aps":{"alert":"a"}},"weight":0},{"name":"B","payload":{"aps":{"alert":"b"}},"weight":1}]}"#,
                #"{"id":"\#(other.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"variants":[{"name":"A","payload":{"aps":{"alert":"a"}},"weight":9223372036854775807},{"name":"B","payload":{"aps":{"alert":"b"}},"weight":1}]}"#,
                #"{"id":"\#(other.uuidString)","topic":"\#(topic)","tokens":[\#(list)],"rate":1000000000000,"variants":\#(variants)}"#,
            ]
            for body in bad {
                let answer = try await server.call("POST", "/v1/campaigns", key: bearer, body: body)
                #expect(answer.status == 400, "\(answer.body)")
            }
            #expect(try await store.variants(of: other).isEmpty)
        }
        await server.stop()
    }

    /// A campaign localized and delivered at local time through the API, with `recipients`
    /// carrying locales and zones: one part per locale and start, reported by the launch's id; a
    /// recipient in no known zone gets 400 naming it, and nothing is created.
    @Test func aLocalizedLocalTimeCampaignThroughTheAPIIsLaunchedInParts() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-parts")
            let (_, bearer) = try await store.createAPIKey(topics: [topic])
            let tokens = PostgresFixture.tokens(30)
            // Locales fr_FR, en and none; zones UTC and Asia/Tokyo (nine hours apart: two starts).
            let recipients = tokens.enumerated().map { index, token in
                let locale = ["\"fr_FR\"", "\"en\"", "null"][index % 3]
                return #"{"token":"\#(token.hexString)","locale":\#(locale),"time_zone":"\#(index % 2 == 0 ? "UTC" : "Asia/Tokyo")"}"#
            }.joined(separator: ",")
            let id = UUID()
            let body = #"{"id":"\#(id.uuidString)","topic":"\#(topic)","recipients":[\#(recipients)],"payload":{"aps":{"alert":"Hello"}},"#
                + #""localized":{"fr":{"aps":{"alert":"Bonjour"}}},"local_time":"09:00"}"#
            let created = try await server.call("POST", "/v1/campaigns", key: bearer, body: body)
            #expect(created.status == 201, "\(created.body)")
            let records = try await store.variants(of: id)
            #expect(records.count == 4, "fr and default, each at two starts: \(records.map(\.variant))")
            #expect(Set(records.compactMap { $0.variant?.split(separator: ".").first.map(String.init) }) == ["default", "fr"])
            #expect(Set(records.compactMap(\.startsAt)).count == 2)
            #expect(records.allSatisfy { $0.state == .scheduled || $0.state == .running })
            #expect(records.reduce(0) { $0 + $1.total } == 30)
            #expect(records.filter { $0.variant?.hasPrefix("fr.") == true }.reduce(0) { $0 + $1.total } == 10)
            let report = try await server.call("GET", "/v1/campaigns/\(id.uuidString)", key: bearer)
            #expect(report.status == 200)
            #expect(report.body.contains(#""split":true"#) && report.body.contains(#""total":30"#), "\(report.body)")
            for record in records { _ = try await store.setState(record.id, to: .cancelled, from: [.running, .pending, .scheduled]) }

            let other = UUID()
            let unknown = body.replacingOccurrences(of: id.uuidString, with: other.uuidString)
                .replacingOccurrences(of: #""time_zone":"Asia/Tokyo"}"#, with: #""time_zone":"Mars/Olympus"}"#)
            let refused = try await server.call("POST", "/v1/campaigns", key: bearer, body: unknown)
            #expect(refused.status == 400, "\(refused.body)")
            #expect(refused.body.contains(#"\"recipients\"[1]: unknown time zone"#), "\(refused.body)")
            let both = try await server.call(
                "POST", "/v1/campaigns", key: bearer,
                body: body.replacingOccurrences(of: id.uuidString, with: other.uuidString).replacingOccurrences(of: #""local_time":"09:00""#, with: #""local_time":"09:00","at":"2030-01-01T00:00:00Z""#)
            )
            #expect(both.status == 400, "\(both.body)")
            #expect(try await store.variants(of: other).isEmpty)
        }
        await server.stop()
    }

    /// Devices registered through the API with their time zones and locales, then a localized
    /// local-time campaign of the registry: its parts follow what the devices registered.
    @Test func aLocalTimeCampaignOfTheRegistryFollowsTheDevicesZones() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-registry-parts")
            let (_, bearer) = try await store.createAPIKey(topics: [topic])
            let tokens = PostgresFixture.tokens(4)
            let devices = [("fr_FR", "Europe/Paris"), ("en_GB", "Europe/London"), ("fr_CA", "America/Montreal"), (nil, nil)] as [(String?, String?)]
            for (token, (locale, zone)) in zip(tokens, devices) {
                let fields = [locale.map { #""locale":"\#($0)""# }, zone.map { #""time_zone":"\#($0)""# }].compactMap { $0 }
                let put = try await server.call(
                    "PUT", "/v1/devices/\(token.hexString)", key: bearer,
                    body: #"{"topic":"\#(topic)","user":"u-\#(token.hexString.prefix(8))"\#(fields.map { "," + $0 }.joined())}"#
                )
                #expect(put.status == 200, "\(put.body)")
            }
            let bad = try await server.call(
                "PUT", "/v1/devices/\(tokens[0].hexString)", key: bearer, body: #"{"topic":"\#(topic)","user":"u","time_zone":"Mars/Olympus"}"#
            )
            #expect(bad.status == 400, "\(bad.body)")
            let id = UUID()
            let created = try await server.call(
                "POST", "/v1/campaigns", key: bearer,
                body: #"{"id":"\#(id.uuidString)","topic":"\#(topic)","from_registry":true,"payload":{"aps":{"alert":"Hello"}},"#
                    + #""localized":{"fr":{"aps":{"alert":"Bonjour"}}},"local_time":"09:00","default_zone":"UTC"}"#
            )
            #expect(created.status == 201, "\(created.body)")
            // Paris and Montreal in French, London and the device without a zone (UTC) in the
            // fallback; parts by UTC offset.
            let expected = ["fr.utc+0100", "default.utc+0000", "fr.utc-0500"]
            let records = try await store.variants(of: id)
            #expect(Set(records.compactMap(\.variant)) == Set(expected), "\(records.map(\.variant))")
            #expect(records.reduce(0) { $0 + $1.total } == 4)
            for record in records { _ = try await store.setState(record.id, to: .cancelled, from: [.running, .pending, .scheduled]) }
        }
        await server.stop()
    }

    /// Devices registered and a group set through the API; a ring to the group is taken (no
    /// worker runs here: its devices stay pending) and reported per device with owners; a device
    /// removed is gone.
    @Test func devicesGroupsAndARingThroughTheAPI() async throws {
        let server = try await Server.start()
        try await PostgresFixture.withStore { store in
            let topic = PostgresFixture.topic("api-ring")
            let (_, bearer) = try await store.createAPIKey(topics: [topic], label: "doorbell backend")
            let run = String(UInt64.random(in: 0...UInt64.max), radix: 36)
            let (alice, bob, group) = ("alice-\(run)", "bob-\(run)", "door-\(run)")
            let phones = PostgresFixture.tokens(3)
            for (phone, user) in zip(phones, [alice, bob, bob]) {
                let answer = try await server.call(
                    "PUT", "/v1/devices/\(phone.hexString)", key: bearer, body: #"{"topic":"\#(topic)","user":"\#(user)","platform":"ios"}"#
                )
                #expect(answer.status == 200, "\(answer.body)")
                #expect(answer.body.contains(#""status":"active""#))
            }
            // Groups are shared by every app: a key for some topics may not change one.
            let refused = try await server.call("PUT", "/v1/groups/\(group)/members", key: bearer, body: #"{"users":["\#(bob)"]}"#)
            #expect(refused.status == 403, "\(refused.body)")
            #expect(try await store.groupMembers(group).isEmpty)
            let (_, admin) = try await store.createAPIKey(topics: ["*"], label: "household service")
            let members = try await server.call("PUT", "/v1/groups/\(group)/members", key: admin, body: #"{"users":["\#(bob)","\#(alice)"]}"#)
            #expect(members.status == 200, "\(members.body)")
            #expect(try await store.groupMembers(group) == [alice, bob].sorted())

            let removed = try await server.call("DELETE", "/v1/devices/\(phones[2].hexString)?topic=\(topic)", key: bearer)
            #expect(removed.status == 204)
            #expect(try await server.call("DELETE", "/v1/devices/\(phones[2].hexString)?topic=\(topic)", key: bearer).status == 404)

            let ring = try await server.call("POST", "/v1/notify", key: bearer, body: #"{"topic":"\#(topic)","group":"\#(group)","payload":{"aps":{"alert":"Ding dong"}}}"#)
            #expect(ring.status == 202, "\(ring.body)")
            let taken = try #require(try JSONSerialization.jsonObject(with: Data(ring.body.utf8)) as? [String: Any])
            #expect(taken["devices"] as? Int == 2)
            let href = try #require(taken["href"] as? String)
            let report = try await server.call("GET", href, key: bearer)
            #expect(report.status == 200)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(report.body.utf8)) as? [String: Any])
            #expect(object["audience"] as? String == "group:\(group)")
            let devices = try #require(object["devices"] as? [[String: Any]])
            #expect(Set(devices.compactMap { $0["token"] as? String }) == Set(phones.prefix(2).map(\.hexString)))
            #expect(Set(devices.compactMap { $0["user"] as? String }) == [alice, bob])
            #expect(devices.allSatisfy { $0["status"] as? String == "pending" })
            #expect(try await server.call("GET", "/v1/notifications/\(UUID().uuidString)", key: bearer).status == 404)
            let campaignID = try #require((taken["id"] as? String).flatMap(UUID.init(uuidString:)))
            #expect(try await store.campaign(campaignID)?.kind == .notification)

            // The same id again sends nothing more; an id a campaign holds is refused.
            let again = try await server.call(
                "POST", "/v1/notify", key: bearer, body: #"{"id":"\#(campaignID.uuidString)","topic":"\#(topic)","group":"\#(group)","payload":{"aps":{"alert":"x"}}}"#
            )
            #expect(again.status == 200 && again.body.contains(#""created":false"#), "\(again.body)")
            let launched = PostgresFixture.campaign(topic: topic)
            #expect(try await store.createCampaign(launched))
            let taken409 = try await server.call(
                "POST", "/v1/notify", key: bearer, body: #"{"id":"\#(launched.id.uuidString)","topic":"\#(topic)","group":"\#(group)","payload":{"aps":{"alert":"x"}}}"#
            )
            #expect(taken409.status == 409, "\(taken409.body)")
            #expect(try await store.campaign(launched.id)?.kind == .campaign)
        }
        await server.stop()
    }

    /// Every operation the OpenAPI document describes is routed: without a key each `/v1` one
    /// answers 401 (an unrouted one would be 404), and the open ones answer 200.
    @Test func theOpenAPIDocumentDescribesRoutedOperations() async throws {
        let server = try await Server.start()
        let answer = try await server.call("GET", "/openapi.json")
        #expect(answer.status == 200)
        let document = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        let paths = try #require(document["paths"] as? [String: [String: Any]])
        #expect(Set(paths.keys) == [
            "/v1/notify", "/v1/notifications/{id}", "/v1/devices/{token}", "/v1/groups/{id}/members", "/v1/campaigns",
            "/v1/campaigns/{id}", "/healthz", "/openapi.json",
        ])
        for (path, operations) in paths {
            let concrete = path.replacingOccurrences(of: "{id}", with: UUID().uuidString).replacingOccurrences(of: "{token}", with: String(repeating: "ab", count: 32))
            for method in operations.keys {
                let reply = try await server.call(method.uppercased(), concrete, body: method == "get" || method == "delete" ? nil : "{}")
                #expect(reply.status == (path.hasPrefix("/v1/") ? 401 : 200), "\(method) \(path): \(reply.status)")
            }
        }
        await server.stop()
    }
}
