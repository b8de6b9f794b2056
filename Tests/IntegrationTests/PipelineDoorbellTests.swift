import APNSMockServer
import Foundation
import NIOCore
import PushFleetAPI
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import PushFleetTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The doorbell lane: a ring reaches every phone of everyone sharing the doorbell, once, while a
/// big campaign keeps the same workers busy; APNs' verdicts on those phones reach the registry.
/// In the pipeline suite, so its coordinator never leads while another pipeline test runs.
extension PipelineTests {
    /// Three users share a doorbell, two phones each. A 200,000-token campaign runs on the same
    /// workers (one shard of each at a time per connection, as they claim), throttled to 4,000 a
    /// second so that it still runs when the rings are done however fast the machine (unthrottled,
    /// a fast machine finished it first); each ring is sent by `pushfleet notify --group --wait`
    /// and must reach the six phones exactly once, accepted, while the campaign is still running.
    /// The campaign is then cancelled and must reconcile.
    @Test(arguments: ["http2", "binary"])
    func aGroupRingReachesEverySharedPhoneOnceWhileACampaignRuns(_ protocol: String) async throws {
        let fixture = try await PipelineFixture.start(count: 200_000)
        defer { Task { await fixture.stop() } }
        let household = Household(topic: fixture.topic)
        try await fixture.withStore { store in try await household.register(in: store) }

        let coordinator = try fixture.startCoordinator()
        let workers = try (0..<2).map { _ in try fixture.startWorker(protocol: `protocol`) }
        let campaign = try await fixture.launch(["--rate", "4000"], protocol: `protocol`)
        _ = try await fixture.waitForStatus(campaign) { ($0["accepted"] as? Int ?? 0) > 0 }

        // The first ring by `pushfleet notify`, the others by `POST /v1/notify`.
        let api = try await fixture.startAPI()
        let bearer = try await fixture.withStore { store in try await store.createAPIKey(topics: [fixture.topic]).bearer }
        let rings = 3
        for ring in 1...rings {
            let report: [String: Any]
            if ring == 1 {
                let answer = try await fixture.notify(["--group", household.group, "--wait", "--json"], protocol: `protocol`)
                #expect(answer.status == 0, "ring \(ring): \(answer.error)")
                report = try #require(try JSONSerialization.jsonObject(with: Data(answer.output.utf8)) as? [String: Any])
            } else {
                let body = #"{"topic":"\#(fixture.topic)","group":"\#(household.group)","payload":{"aps":{"alert":"Ring \#(ring)"}}}"#
                let taken = try await LoopbackHTTP.request("POST", port: api.port, path: "/v1/notify", bearer: bearer, body: body)
                #expect(taken.status == 202, "ring \(ring): \(taken.body)")
                let href = try #require((try JSONSerialization.jsonObject(with: Data(taken.body.utf8)) as? [String: Any])?["href"] as? String)
                report = try await fixture.waitForOutcomes(href, port: api.port, bearer: bearer)
            }
            #expect(report["state"] as? String == "completed")
            let devices = try #require(report["devices"] as? [[String: Any]])
            #expect(Set(devices.compactMap { $0["token"] as? String }) == Set(household.phones.map(\.hexString)))
            #expect(devices.allSatisfy { $0["status"] as? String == "accepted" }, "ring \(ring): \(devices)")
            #expect(Set(devices.compactMap { $0["user"] as? String }) == Set(household.users))
            for phone in household.phones {
                #expect(fixture.mock.ledger.deliveries(of: phone) == ring, "ring \(ring) reached \(phone.hexString) \(fixture.mock.ledger.deliveries(of: phone)) times")
            }
        }
        let during = try await fixture.status(campaign)
        #expect(during["state"] as? String == "running", "the campaign ended before the rings; they proved nothing")
        #expect((during["pending"] as? Int ?? 0) > 0)

        let cancel = try await PushFleetProcess.run(["campaign", "cancel", campaign.uuidString] + fixture.stateArguments)
        #expect(cancel.status == 0, "\(cancel.error)")
        let status = try await fixture.waitForStatus(campaign) { $0["state"] as? String == "cancelled" && $0["pending"] as? Int == 0 }
        let rejected = (status["rejected"] as? [String: Int] ?? [:]).values.reduce(0, +)
        let (accepted, cancelled) = (try #require(status["accepted"] as? Int), try #require(status["cancelled"] as? Int))
        #expect(accepted + rejected + cancelled == fixture.tokens.count)
        // Every delivery of the campaign is counted once, re-sends aside.
        let ledger = fixture.mock.ledger.snapshot()
        let resent = try #require(status["resent"] as? Int)
        #expect(ledger.accepted - rings * household.phones.count <= accepted + resent)
        #expect(ledger.accepted - rings * household.phones.count >= accepted)

        await stopAll(workers + [coordinator, api.process])
    }

    /// A phone APNs answers `410 Unregistered` (HTTP/2), or that the feedback service reports
    /// (binary), is marked unregistered at APNs' time; the next ring leaves it out. Registered
    /// again with a time before APNs' verdict it stays so; registered after it, it is revived and
    /// rings again.
    @Test(arguments: ["http2", "binary"])
    func aPhoneAPNsDeclaredGoneIsRevivedOnlyByALaterRegistration(_ protocol: String) async throws {
        let fixture = try await PipelineFixture.start(count: 100, invalidEvery: nil, unregisteredEvery: 2)
        defer { Task { await fixture.stop() } }
        // The simulator calls every other fixture token unregistered: the user's old phone is one.
        let gone = try #require(fixture.unregistered.first)
        let alive = try #require(fixture.tokens.first { !fixture.unregistered.contains($0) })
        let registered = Date(timeIntervalSinceNow: -3_600)
        try await fixture.withStore { store in
            try await store.migrate()
            for phone in [gone, alive] {
                _ = try await store.registerDevice(
                    DeviceRegistration(token: phone, topic: fixture.topic, environment: .production, user: "alice", registeredAt: registered)
                )
            }
        }
        let coordinator = try fixture.startCoordinator()
        let worker = try fixture.startWorker(protocol: `protocol`)
        let before = Date()
        let first = try await fixture.notify(["--user", "alice", "--wait", "--json"], protocol: `protocol`)
        let report = try #require(try JSONSerialization.jsonObject(with: Data(first.output.utf8)) as? [String: Any], "\(first.error)")
        let devices = try #require(report["devices"] as? [[String: Any]])
        let answers = Dictionary(uniqueKeysWithValues: devices.compactMap { d in (d["token"] as? String).map { ($0, d) } })
        #expect(answers[alive.hexString]?["status"] as? String == "accepted")
        if `protocol` == "http2" {
            #expect(first.status == 4, "a rejected device makes `notify --wait` exit 4")
            #expect(answers[gone.hexString]?["status"] as? String == "rejected")
            #expect(answers[gone.hexString]?["reason"] as? String == "Unregistered")
            #expect((answers[gone.hexString]?["apns_timestamp"] as? Int).map { $0 >= Int(before.timeIntervalSince1970 * 1000) - 1_000 } == true)
        } else {
            // The binary gateway accepts it and names it at the next poll of the feedback service.
            #expect(first.status == 0, "\(first.error)")
        }

        try await fixture.withStore { store in
            let start = ContinuousClock.now
            while try await store.tokenStatus(gone, topic: fixture.topic, environment: .production) != .unregistered {
                try #require(ContinuousClock.now - start < .seconds(60), "the registry never marked the phone unregistered")
                try await Task.sleep(for: .milliseconds(200))
            }
        }
        let second = try await fixture.notify(["--user", "alice", "--wait", "--json"], protocol: `protocol`)
        #expect(second.status == 0, "\(second.error)")
        let secondReport = try #require(try JSONSerialization.jsonObject(with: Data(second.output.utf8)) as? [String: Any])
        #expect((secondReport["devices"] as? [[String: Any]])?.compactMap { $0["token"] as? String } == [alive.hexString])

        try await fixture.withStore { store in
            // APNs' verdict is dated about `before` (the simulator's clock when it answered).
            let early = try await store.registerDevice(
                DeviceRegistration(token: gone, topic: fixture.topic, environment: .production, user: "alice", registeredAt: before.addingTimeInterval(-60))
            )
            #expect(early.status == .unregistered)
            let late = try await store.registerDevice(
                DeviceRegistration(token: gone, topic: fixture.topic, environment: .production, user: "alice", registeredAt: Date())
            )
            #expect(late.status == .active)
        }
        let third = try await fixture.notify(["--user", "alice", "--wait", "--json"], protocol: `protocol`)
        let thirdReport = try #require(try JSONSerialization.jsonObject(with: Data(third.output.utf8)) as? [String: Any], "\(third.error)")
        #expect(Set((thirdReport["devices"] as? [[String: Any]])?.compactMap { $0["token"] as? String } ?? []) == [alive.hexString, gone.hexString])
        await stopAll([worker, coordinator])
    }
}

extension PipelineTests {
    /// A ring's worker is SIGKILLed while the ring is in flight (see ``RingInFlight``). Another
    /// worker takes it over when the lease runs out: every phone gets it, each outcome is counted
    /// once, and every second delivery is counted as re-sent.
    @Test(arguments: [("http2", GatewayManner.kind), ("http2", .unkind), ("binary", .kind)])
    func aRingWhoseWorkerIsKilledIsFinishedByAnotherAndCountedOnce(_ protocol: String, _ manner: GatewayManner) async throws {
        let ring = try await RingInFlight.start(protocol: `protocol`, manner: manner)
        defer { Task { await ring.fixture.stop() } }
        ring.worker.signal(SIGKILL)
        _ = await ring.worker.wait()
        ring.fixture.mock.stall.end()
        try await ring.requireNotified()
        let successor = try ring.fixture.startWorker(protocol: `protocol`)
        let report = try await ring.waitUntilCompleted()
        ring.expectEveryPhoneCountedOnce(report)
        #expect(report.record.resent > 0, "the killed worker had nothing in flight; the takeover was not tested")
        await stopAll([successor, ring.coordinator])
    }

    /// A ring's worker is frozen (SIGSTOP) with the ring in flight, for longer than its 3 s lease,
    /// and another worker claims the ring. The frozen worker is continued (SIGCONT) as soon as
    /// the claim is seen, while the gateway still holds the new holder's answers: it reads the
    /// answers it was waiting for, which came while it was stopped, and must count none of them,
    /// since the shard is no longer its own. The ring completes by the new holder, counted once;
    /// the continued worker drains and exits cleanly, and a second ring (whose outcomes the
    /// coordinator folds after anything the continued worker could have sent) changes nothing
    /// in the first one's counts.
    @Test(arguments: [("http2", GatewayManner.kind), ("http2", .unkind), ("binary", .kind)])
    func aRingWhoseWorkerIsFrozenPastItsLeaseIsFinishedByAnotherAndCountedOnce(_ protocol: String, _ manner: GatewayManner) async throws {
        let ring = try await RingInFlight.start(protocol: `protocol`, manner: manner)
        defer { Task { await ring.fixture.stop() } }
        ring.worker.signal(SIGSTOP)
        try await ring.worker.waitUntilStopped()
        ring.fixture.mock.stall.end()
        try await ring.requireNotified()
        let claimed = try await ring.claims()
        let successor = try ring.fixture.startWorker(protocol: `protocol`)
        try await ring.waitForClaims(after: claimed, by: successor)
        ring.worker.signal(SIGCONT)
        let report = try await ring.waitUntilCompleted()
        ring.expectEveryPhoneCountedOnce(report)
        #expect(report.record.resent > 0, "the frozen worker had nothing in flight; the takeover was not tested")

        ring.worker.signal(SIGTERM)
        #expect(await ring.worker.wait() == 0, "the continued worker drains and exits: \(ring.worker.standardError.suffix(4_000))")
        let second = try await ring.ringAgain()
        #expect(second.record.accepted == ring.household.phones.count)
        let after = try await ring.waitUntilCompleted()
        #expect(after.record.accepted == report.record.accepted, "the continued worker's outcomes were counted: \(report.record) then \(after.record)")
        #expect(after.record.resent == report.record.resent)
        ring.expectEveryPhoneCountedOnce(after, rings: 2, resent: after.record.resent + second.record.resent)
        await stopAll([successor, ring.coordinator])
    }

    /// A ring's worker gets SIGTERM with the ring in flight: it waits for the answers (the 3 s the
    /// gateway holds them are well inside its drain), counts them, and exits cleanly. No other
    /// worker runs: the ring completes by the drained worker alone, and no phone gets it twice.
    @Test(arguments: ["http2", "binary"])
    func aRingWhoseWorkerIsDrainedIsCountedOnceAndSentOnce(_ protocol: String) async throws {
        let ring = try await RingInFlight.start(protocol: `protocol`, stalled: false)
        defer { Task { await ring.fixture.stop() } }
        ring.worker.signal(SIGTERM)
        try await ring.requireNotified()
        #expect(await ring.worker.wait() == 0, "a draining worker exits cleanly: \(ring.worker.standardError.suffix(4_000))")
        let report = try await ring.waitUntilCompleted()
        ring.expectEveryPhoneCountedOnce(report)
        #expect(report.record.resent == 0, "the worker logged: \(ring.worker.standardError.suffix(4_000))")
        let deliveries = ring.household.phones.map { ring.fixture.mock.ledger.deliveries(of: $0) }
        #expect(deliveries == Array(repeating: 1, count: ring.household.phones.count), "each phone once: \(deliveries)")
        await stopAll([ring.coordinator])
    }

    /// The coordinator is SIGKILLed with a ring in flight and started again: the ring completes
    /// once its worker's answers come, counted once, and no phone gets it twice.
    @Test(arguments: ["http2", "binary"])
    func aRingOutlivesACoordinatorRestartAndIsCountedOnce(_ protocol: String) async throws {
        let ring = try await RingInFlight.start(protocol: `protocol`, stalled: false)
        defer { Task { await ring.fixture.stop() } }
        ring.coordinator.signal(SIGKILL)
        _ = await ring.coordinator.wait()
        try await ring.requireNotified()
        let coordinator = try ring.fixture.startCoordinator()
        let report = try await ring.waitUntilCompleted()
        ring.expectEveryPhoneCountedOnce(report)
        let deliveries = ring.household.phones.map { ring.fixture.mock.ledger.deliveries(of: $0) }
        #expect(deliveries == Array(repeating: 1, count: ring.household.phones.count), "each phone once: \(deliveries); the worker logged: \(ring.worker.standardError.suffix(4_000))")
        await stopAll([ring.worker, coordinator])
    }
}

/// A ring to a household's six phones, held in flight by its only worker: every answer waits 3 s
/// from its request (HTTP/2: the response; binary: the answer to the worker's sentinel), so the
/// worker cannot yet know its six frames were taken; the test acts on the worker as soon as the
/// gateway has read them. A test whose worker must not get its answers before that (killed,
/// frozen) starts the ring with the simulator stalled, which holds them however long the test
/// takes to act, up to the worker's own wait for an answer (binary 5 s, HTTP/2 10 s; past it
/// the worker gives the connection up and writes the ring again). A read-rate limit does not
/// hold them: all six and the sentinel fit one read. What happens to the worker next is the
/// test's, which then ends the stall (`fixture.mock.stall.end()`); a new holder's answers still
/// come 3 s after its requests, after the old holder's.
struct RingInFlight {
    let fixture: PipelineFixture
    let household: Household
    let coordinator: PushFleetProcess
    let worker: PushFleetProcess
    let protocolName: String
    let id: UUID
    /// The `pushfleet notify` that rang, which may still be ending.
    let notify: Task<(status: Int32, output: String, error: String), any Error>

    /// Starts the fixture (its HTTP/2 gateway in `manner`), the coordinator and the worker, and
    /// rings, with the simulator `stalled` or not. The fixture is stopped if any of it fails;
    /// otherwise stopping it, and ending the stall, is the caller's.
    static func start(protocol: String, manner: GatewayManner = .kind, stalled: Bool = true) async throws -> RingInFlight {
        let fixture = try await PipelineFixture.start(
            count: 10, invalidEvery: nil, unregisteredEvery: nil, http2Faults: .init(answerDelay: .seconds(3)), errorDelay: .seconds(3),
            manner: manner
        )
        do {
            return try await Self.ring(fixture, protocol: `protocol`, stalled: stalled)
        } catch {
            await fixture.stop()
            throw error
        }
    }

    private static func ring(_ fixture: PipelineFixture, protocol: String, stalled: Bool) async throws -> RingInFlight {
        let household = Household(topic: fixture.topic)
        try await fixture.withStore { store in try await household.register(in: store) }
        let coordinator = try fixture.startCoordinator()
        let worker = try fixture.startWorker(protocol: `protocol`)
        // The lane's connection is open before the ring (HTTP/2), so the ring goes at once.
        try await Task.sleep(for: .seconds(1))
        if stalled { fixture.mock.stall.begin() }
        // The ring is in flight before `notify` ends, and the test acts on it then, not after
        // the process has ended: a loaded machine can take longer to end a process (its exit,
        // its pipes closing) than the ring takes to be answered, or than the worker waits for
        // an answer before it writes the ring again (CI saw both). `requireNotified()` checks
        // the process afterwards.
        let id = UUID()
        let notify = Task { try await fixture.notify(["--group", household.group, "--notification-id", id.uuidString], protocol: `protocol`) }
        do {
            try await fixture.waitUntilLeased(id, by: worker)
            // Seen at its claim, the ring may not be written yet: the binary lane connects on
            // its first notification (a TLS handshake, slow on a loaded machine; CI saw a fixed
            // wait fall short). The gateway's ledger holds the six once it has read them.
            try await Self.waitUntilWritten(household.phones, to: fixture, by: worker)
        } catch {
            let notified = try? await notify.value
            throw WaitFailure("\(error); notify ended with \(notified.map { "status \($0.status): \($0.error)" } ?? "an error")")
        }
        return RingInFlight(
            fixture: fixture, household: household, coordinator: coordinator, worker: worker, protocolName: `protocol`, id: id, notify: notify
        )
    }

    /// Waits for the `notify` that rang to end, and requires it to have succeeded.
    func requireNotified() async throws {
        let notified = try await self.notify.value
        try #require(notified.status == 0, "\(notified.error)")
    }

    /// Waits until the gateway has read every one of `phones`' notifications. Fails when `worker`
    /// ends first, and after a minute.
    private static func waitUntilWritten(_ phones: [DeviceToken], to fixture: PipelineFixture, by worker: PushFleetProcess) async throws {
        let start = ContinuousClock.now
        while true {
            let deliveries = phones.map { fixture.mock.ledger.deliveries(of: $0) }
            if deliveries.allSatisfy({ $0 > 0 }) { return }
            guard worker.isRunning else {
                throw WaitFailure("the worker ended with status \(await worker.wait()) before it wrote the ring (deliveries \(deliveries)): \(worker.standardError.suffix(4_000))")
            }
            guard ContinuousClock.now - start < .seconds(60) else {
                throw WaitFailure("the gateway had not read the ring within a minute (deliveries \(deliveries)); the worker logged: \(worker.standardError.suffix(4_000))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    /// How many claims the ring's shards have had: Redis' fencing counter, which every claim
    /// increments.
    func claims() async throws -> Int {
        let client = RedisClient(configuration: try RedisConfiguration(url: self.fixture.redisURL))
        defer { Task { try? await client.shutdown() } }
        let key = "pf:{\(self.id.uuidString.lowercased())}:fence"
        return try await client.withConnection { try $0.command("GET", key).integer ?? 0 }
    }

    /// Waits until the ring's shard was claimed again after `claimed` claims, by `worker`, the only
    /// worker not stopped. Fails when it ends, and after a minute.
    func waitForClaims(after claimed: Int, by worker: PushFleetProcess) async throws {
        let start = ContinuousClock.now
        while try await self.claims() <= claimed {
            guard worker.isRunning else {
                throw WaitFailure("the new worker ended with status \(await worker.wait()): \(worker.standardError.suffix(4_000))")
            }
            guard ContinuousClock.now - start < .seconds(60) else {
                throw WaitFailure("nobody claimed \(self.id) again within a minute: \(try await self.situation(newWorker: worker))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Where the ring's queue, record and processes stand, for a failed wait's message.
    private func situation(newWorker: PushFleetProcess) async throws -> String {
        let client = RedisClient(configuration: try RedisConfiguration(url: self.fixture.redisURL))
        defer { Task { try? await client.shutdown() } }
        let prefix = "pf:{\(self.id.uuidString.lowercased())}:"
        let queue = try await client.withConnection { connection in
            ["pending": try connection.command("LRANGE", prefix + "pending", "0", "-1"),
             "leases": try connection.command("ZRANGE", prefix + "leases", "0", "-1", "WITHSCORES"),
             "attempts": try connection.command("HGETALL", prefix + "attempts"),
             "dead": try connection.command("LRANGE", prefix + "dead", "0", "-1"),
             "time": try connection.command("TIME")]
        }
        let record = try await self.fixture.withStore { store in try await store.notificationReport(self.id)?.record }
        return "queue \(queue.sorted { $0.key < $1.key }); record \(record.map { "\($0)" } ?? "none"); "
            + "coordinator running \(self.coordinator.isRunning), logged: \(self.coordinator.standardError.suffix(2_000)); "
            + "the stopped worker logged: \(self.worker.standardError.suffix(2_000)); the new worker logged: \(newWorker.standardError.suffix(2_000))"
    }

    /// The ring's report once Postgres says it completed; fails after two minutes.
    func waitUntilCompleted(_ id: UUID? = nil) async throws -> NotificationReport {
        try await self.fixture.withStore { store in
            let start = ContinuousClock.now
            while true {
                let report = try #require(try await store.notificationReport(id ?? self.id))
                if report.record.state == .completed { return report }
                try #require(ContinuousClock.now - start < .seconds(120), "the ring never completed: \(report.record)")
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// Rings the household again (with whichever worker is left) and returns that ring's report
    /// once it completed.
    func ringAgain() async throws -> NotificationReport {
        let id = UUID()
        let notified = try await self.fixture.notify(["--group", self.household.group, "--notification-id", id.uuidString], protocol: self.protocolName)
        try #require(notified.status == 0, "\(notified.error)")
        return try await self.waitUntilCompleted(id)
    }

    /// Every phone's outcome in `report` is `accepted` and counted once; each phone got the
    /// household's `rings` rings at least, and every delivery beyond those is one of the `resent`
    /// the rings counted (by default `report`'s).
    func expectEveryPhoneCountedOnce(_ report: NotificationReport, rings: Int = 1, resent: Int? = nil) {
        let phones = self.household.phones.count
        let resent = resent ?? report.record.resent
        #expect(report.devices.map(\.status) == Array(repeating: .accepted, count: phones))
        #expect(report.record.accepted == phones)
        #expect(report.record.rejected.values.reduce(0, +) == 0, "\(report.record)")
        let deliveries = self.household.phones.map { self.fixture.mock.ledger.deliveries(of: $0) }
        #expect(deliveries.allSatisfy { $0 >= rings }, "\(deliveries)")
        #expect(deliveries.reduce(0) { $0 + $1 - rings } <= resent, "duplicates \(deliveries), resent \(resent)")
    }
}

extension PipelineFixture {
    /// Waits until a shard of `campaign` is leased, by `worker`, the only worker running. Fails at
    /// once when the worker ends, or the campaign finishes without a lease ever being seen, and
    /// after a minute otherwise; each failure says what the worker logged and where the campaign is.
    func waitUntilLeased(_ campaign: UUID, by worker: PushFleetProcess) async throws {
        let client = RedisClient(configuration: try RedisConfiguration(url: self.redisURL))
        defer { Task { try? await client.shutdown() } }
        let queue = CampaignQueue(client: client)
        let start = ContinuousClock.now
        var polls = 0
        while try await queue.leaseCount(campaign: campaign) == 0 {
            polls += 1
            func situation() async throws -> String {
                let record = try await self.withStore { store in try await store.notificationReport(campaign)?.record }
                let pending = try await queue.pendingCount(campaign: campaign)
                return "\(polls) polls in \(ContinuousClock.now - start); pending shards \(pending); "
                    + "record \(record.map { "\($0)" } ?? "none"); the worker logged: \(worker.standardError.suffix(4_000))"
            }
            if !worker.isRunning {
                let status = await worker.wait()
                throw WaitFailure("the worker ended with status \(status) before it claimed \(campaign): \(try await situation())")
            }
            if polls % 50 == 0, let record = try await self.withStore({ store in try await store.notificationReport(campaign)?.record }),
               record.state == .completed {
                throw WaitFailure("\(campaign) completed without a lease ever being seen: \(try await situation())")
            }
            if ContinuousClock.now - start > .seconds(60) {
                throw WaitFailure("no worker claimed \(campaign) within a minute: \(try await situation())")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// A wait in a test that ran out, and why.
struct WaitFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Three users sharing one doorbell, two phones each, registered in the fixture's topic.
struct Household {
    let topic: String
    let group: String
    let users: [String]
    let phones: [DeviceToken]

    init(topic: String) {
        let seed = UInt64.random(in: 1...UInt64.max)
        self.topic = topic
        self.group = "doorbell-\(String(seed, radix: 36))"
        self.users = (1...3).map { "user-\($0)-\(String(seed, radix: 36))" }
        self.phones = TestTokens.tokens(6, seed: seed)
    }

    func register(in store: CampaignStore) async throws {
        try await store.migrate()
        for (offset, phone) in self.phones.enumerated() {
            _ = try await store.registerDevice(
                DeviceRegistration(token: phone, topic: self.topic, environment: .production, user: self.users[offset / 2], platform: "ios", registeredAt: Date())
            )
        }
        try await store.setGroupMembers(self.group, users: self.users)
    }
}

extension PipelineFixture {
    /// Starts `pushfleet api` on a free port and waits until it answers.
    func startAPI() async throws -> (process: PushFleetProcess, port: Int) {
        let port = try FreePort.take()
        let process = try self.spawn(["api", "--host", "127.0.0.1", "--port", "\(port)"] + self.stateArguments)
        try await APITests.Server.waitUntilHealthy(process, port: port)
        return (process, port)
    }

    /// Reads `GET href` until the notification is finished, or two minutes passed.
    func waitForOutcomes(_ href: String, port: Int, bearer: String) async throws -> [String: Any] {
        let start = ContinuousClock.now
        while true {
            let answer = try await LoopbackHTTP.request("GET", port: port, path: href, bearer: bearer)
            let report = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any], "\(answer.status) \(answer.body)")
            let finished = ["completed", "cancelled", "failed"].contains(report["state"] as? String ?? "")
            if finished || ContinuousClock.now - start > .seconds(120) { return report }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    /// Runs `pushfleet notify` for the fixture's topic with a doorbell payload.
    func notify(_ extra: [String], protocol: String) async throws -> (status: Int32, output: String, error: String) {
        try await PushFleetProcess.run(
            ["notify", "--topic", self.topic, "--protocol", `protocol`, "--payload", #"{"aps":{"alert":"Someone is at the door","sound":"default"}}"#]
                + extra + self.stateArguments
        )
    }
}

extension PushFleetProcess {
    /// Waits until the process is stopped (a signal's stop, state `T` in `/proc/PID/stat`); fails
    /// after ten seconds.
    func waitUntilStopped() async throws {
        let start = ContinuousClock.now
        while true {
            let stat = (try? String(contentsOfFile: "/proc/\(self.pid)/stat", encoding: .utf8)) ?? ""
            // The state follows the command name, which is in parentheses.
            if let close = stat.lastIndex(of: ")"), stat[close...].dropFirst(2).first == "T" { return }
            guard ContinuousClock.now - start < .seconds(10) else { throw WaitFailure("process \(self.pid) did not stop: \(stat)") }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
