import APNSMockServer
import Foundation
import NIOCore
import NIOPosix
import PushFleetAPI
import PushFleetCore
import PushFleetPostgres
import PushFleetServices
import Synchronization

/// `pushfleet demo --doorbell`: three users sharing a doorbell, two phones each, registered in
/// the demo's topic; `pushfleet api` in a process of its own, as it is deployed (in this process it
/// would share the event loops the simulator keeps busy); a ring every second by `POST /v1/notify`
/// while the campaign runs, each timed from the request to the simulator's acceptance of the last
/// of the six phones.
final class DemoDoorbell: Sendable {
    let phones: [DeviceToken]
    let group: String
    private let ledger: DeliveryLedger
    private let topic: String
    private let port: Int
    private let bearer: String
    private let loop: any EventLoopGroup
    private let key: String
    private let store: CampaignStore
    private let latencies = Mutex<[Double]>([])
    private let stopping = Atomic<Bool>(false)
    private let failures = Atomic<Int>(0)

    /// Registers the household, creates a key for it and starts `pushfleet api` on a free loopback
    /// port through `start` (given the API's arguments), then waits until it answers `/healthz`.
    static func start(topic: String, store: CampaignStore, ledger: DeliveryLedger, start: ([String]) throws -> Void) async throws -> DemoDoorbell {
        let run = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let users = (1...3).map { "resident-\($0)-\(run)" }
        var phones: [DeviceToken] = []
        for _ in 0..<6 { phones.append(try DeviceToken(bytes: (0..<32).map { _ in UInt8.random(in: 0...255) })) }
        for (offset, phone) in phones.enumerated() {
            _ = try await store.registerDevice(
                DeviceRegistration(token: phone, topic: topic, environment: .production, user: users[offset / 2], platform: "ios", registeredAt: Date())
            )
        }
        let groupID = "front-door-\(run)"
        try await store.setGroupMembers(groupID, users: users)
        let (key, bearer) = try await store.createAPIKey(topics: [topic], label: "pushfleet demo --doorbell")

        let port = try FreePort.take()
        try start(["api", "--host", "127.0.0.1", "--port", "\(port)"])
        // The ringer's requests get a loop of their own, apart from the simulator's.
        let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let began = ContinuousClock.now
        while (try? await LoopbackHTTP.request("GET", port: port, path: "/healthz", group: loop, timeout: .seconds(5)))?.status != 200 {
            guard ContinuousClock.now - began < .seconds(60) else {
                try? await loop.shutdownGracefully()
                throw CLIError("pushfleet api did not answer on 127.0.0.1:\(port) within 60 s")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        return DemoDoorbell(phones: phones, group: groupID, ledger: ledger, topic: topic, port: port, bearer: bearer, loop: loop, key: key.id, store: store)
    }

    private init(
        phones: [DeviceToken], group: String, ledger: DeliveryLedger, topic: String, port: Int, bearer: String,
        loop: any EventLoopGroup, key: String, store: CampaignStore
    ) {
        self.key = key
        self.store = store
        self.loop = loop
        self.phones = phones
        self.group = group
        self.ledger = ledger
        self.topic = topic
        self.port = port
        self.bearer = bearer
    }

    /// Rings every second until ``stop()``; `report` hears each ring's latency in milliseconds.
    /// The first ring goes even if the campaign ends before it.
    func ringEverySecond(report: @escaping @Sendable (Int, Double) -> Void) -> Task<Void, Never> {
        Task {
            var ring = 0
            repeat {
                ring += 1
                do {
                    let milliseconds = try await self.ring(ring)
                    self.latencies.withLock { $0.append(milliseconds) }
                    report(ring, milliseconds)
                } catch {
                    self.failures.add(1, ordering: .relaxed)
                    writeStandardError("ring \(ring) failed: \(error)\n")
                }
                for _ in 0..<10 where !self.stopping.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(100)) }
            } while !self.stopping.load(ordering: .relaxed)
        }
    }

    /// One ring: the request, and meanwhile the simulator's ledger polled every 0.2 ms until every
    /// phone has one more delivery (the lane may deliver before the API has answered). Fails if
    /// the API answers anything but 202, or after 30 s.
    private func ring(_ number: Int) async throws -> Double {
        let before = self.phones.map { self.ledger.deliveries(of: $0) }
        let started = ContinuousClock.now
        let body = PushFleetJSON.encode(Ring(topic: self.topic, group: self.group, alert: "Ring \(number): someone is at the door"))
        let (port, bearer, loop) = (self.port, self.bearer, self.loop)
        let answered = Atomic<Bool>(false)
        let request = Task {
            defer { answered.store(true, ordering: .releasing) }
            let answer = try await LoopbackHTTP.request("POST", port: port, path: "/v1/notify", bearer: bearer, body: body, group: loop)
            guard answer.status == 202 else { throw CLIError("POST /v1/notify answered \(answer.status): \(answer.body)") }
            if ProcessInfo.processInfo.environment["PUSHFLEET_DEMO_TRACE"] != nil {
                writeStandardError("ring \(number): API answered after \(ContinuousClock.now - started)\n")
            }
        }
        while zip(self.phones, before).contains(where: { self.ledger.deliveries(of: $0) <= $1 }) {
            if answered.load(ordering: .acquiring) { try await request.value }  // a failed request fails the ring now
            guard ContinuousClock.now - started < .seconds(30) else {
                request.cancel()
                throw CLIError("ring \(number) did not reach every phone in 30 s")
            }
            try await Task.sleep(for: .microseconds(200))
        }
        let elapsed = ContinuousClock.now - started
        try await request.value
        return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    }

    /// The rings' latencies summed up, and whether every ring was taken and reached every phone
    /// exactly once.
    func summary() -> (text: String, exact: Bool) {
        let sorted = self.latencies.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { return ("doorbell: no ring completed", false) }
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)] }
        let deliveries = self.phones.map { self.ledger.deliveries(of: $0) }
        let failures = self.failures.load(ordering: .relaxed)
        let exact = failures == 0 && deliveries.allSatisfy { $0 == sorted.count }
        let text = String(
            format: "doorbell: %d rings to 6 phones, request to APNs acceptance p50 %.1f ms, p99 %.1f ms, max %.1f ms; deliveries per phone %@",
            sorted.count, percentile(0.5), percentile(0.99), sorted.last!, deliveries.map(String.init).joined(separator: ",")
        )
        let verdict = failures > 0 ? " ✘ \(failures) rings failed" : exact ? " (each ring exactly once)" : " ✘ NOT exactly once per ring"
        return (text + verdict, exact)
    }

    /// Lets the ring in flight finish (`ringing` is the task ``ringEverySecond(report:)`` gave),
    /// then revokes the demo's key. The API process stops with the demo's other processes.
    func stop(_ ringing: Task<Void, Never>?) async {
        self.stopping.store(true, ordering: .relaxed)
        await ringing?.value
        try? await self.loop.shutdownGracefully()
        _ = try? await self.store.revokeAPIKey(self.key)
    }
}

/// The body of a ring's `POST /v1/notify`: an alert with the default sound to the group's devices.
private struct Ring: Encodable {
    struct Payload: Encodable {
        struct APS: Encodable {
            let alert: String
            let sound = "default"
        }

        let aps: APS
    }

    let topic: String
    let group: String
    let payload: Payload

    init(topic: String, group: String, alert: String) {
        self.topic = topic
        self.group = group
        self.payload = Payload(aps: Payload.APS(alert: alert))
    }
}
