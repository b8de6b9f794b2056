import APNSMockServer
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import PushFleetAPI
import PushFleetCore
import PushFleetPostgres
import PushFleetRedis
import ServiceLifecycle
import Synchronization

/// `pushfleet demo --doorbell`: three users sharing a doorbell, two phones each, registered in
/// the demo's topic; `pushfleet api` in this process; a ring every second by `POST /v1/notify`
/// while the campaign runs, each timed from the request to the simulator's acceptance of the
/// last of the six phones.
final class DemoDoorbell: Sendable {
    let phones: [DeviceToken]
    let group: String
    private let ledger: DeliveryLedger
    private let topic: String
    private let port: Int
    private let bearer: String
    private let server: Task<Void, any Error>
    private let services: ServiceGroup
    private let loop: any EventLoopGroup
    private let key: String
    private let store: CampaignStore
    private let latencies = Mutex<[Double]>([])
    private let stopping = Atomic<Bool>(false)

    /// Registers the household and starts the API on a free loopback port.
    static func start(topic: String, store: CampaignStore, queue: CampaignQueue, ledger: DeliveryLedger, logger: Logger) async throws -> DemoDoorbell {
        let run = String(UInt32.random(in: 0...UInt32.max), radix: 36)
        let users = (1...3).map { "resident-\($0)-\(run)" }
        var phones: [DeviceToken] = []
        for _ in 0..<6 { phones.append(try DeviceToken(bytes: (0..<32).map { _ in UInt8.random(in: 0...255) })) }
        for (offset, phone) in phones.enumerated() {
            _ = try await store.registerDevice(
                DeviceRegistration(token: phone, topic: topic, environment: "production", user: users[offset / 2], platform: "ios", registeredAt: Date())
            )
        }
        let groupID = "front-door-\(run)"
        try await store.setGroupMembers(groupID, users: users)
        let (key, bearer) = try await store.createAPIKey(topics: [topic], label: "pushfleet demo --doorbell")

        let (ports, bound) = AsyncStream.makeStream(of: Int.self)
        // The simulator in this process keeps the shared event loops busy; the API and the ringer
        // get a loop of their own, as they would in processes of their own.
        let loop = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let application = APIServer(store: store, queue: queue, logger: logger).application(host: "127.0.0.1", port: 0, group: loop) { port in
            bound.yield(port)
            bound.finish()
        }
        // In a group of its own, so that stopping it is a graceful shutdown, not a cancellation.
        let group = ServiceGroup(configuration: .init(services: [application], logger: logger))
        let server = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CLIError("the demo's API did not start") }
        return DemoDoorbell(phones: phones, group: groupID, ledger: ledger, topic: topic, port: port, bearer: bearer, server: server, services: group, loop: loop, key: key.id, store: store)
    }

    private init(
        phones: [DeviceToken], group: String, ledger: DeliveryLedger, topic: String, port: Int, bearer: String,
        server: Task<Void, any Error>, services: ServiceGroup, loop: any EventLoopGroup, key: String, store: CampaignStore
    ) {
        self.key = key
        self.store = store
        self.services = services
        self.loop = loop
        self.phones = phones
        self.group = group
        self.ledger = ledger
        self.topic = topic
        self.port = port
        self.bearer = bearer
        self.server = server
    }

    /// Rings every second until ``stop()``; `report` hears each ring's latency in milliseconds.
    func ringEverySecond(report: @escaping @Sendable (Int, Double) -> Void) -> Task<Void, Never> {
        Task {
            var ring = 0
            while !self.stopping.load(ordering: .relaxed) {
                ring += 1
                do {
                    let milliseconds = try await self.ring(ring)
                    self.latencies.withLock { $0.append(milliseconds) }
                    report(ring, milliseconds)
                } catch {
                    writeStandardError("ring \(ring) failed: \(error)\n")
                }
                for _ in 0..<10 where !self.stopping.load(ordering: .relaxed) { try? await Task.sleep(for: .milliseconds(100)) }
            }
        }
    }

    /// One ring: the request, then the simulator's ledger polled every 0.2 ms until every phone
    /// has one more delivery. Gives up after 30 s.
    private func ring(_ number: Int) async throws -> Double {
        let before = self.phones.map { self.ledger.deliveries(of: $0) }
        let started = ContinuousClock.now
        let body = #"{"topic":"\#(self.topic)","group":"\#(self.group)","payload":{"aps":{"alert":"Ring \#(number): someone is at the door","sound":"default"}}}"#
        let answer = try await LoopbackHTTP.request("POST", port: self.port, path: "/v1/notify", bearer: self.bearer, body: body, group: self.loop)
        guard answer.status == 202 else { throw CLIError("POST /v1/notify answered \(answer.status): \(answer.body)") }
        let answered = ContinuousClock.now - started
        if ProcessInfo.processInfo.environment["PUSHFLEET_DEMO_TRACE"] != nil { writeStandardError("ring \(number): API answered after \(answered)\n") }
        while zip(self.phones, before).contains(where: { self.ledger.deliveries(of: $0) <= $1 }) {
            guard ContinuousClock.now - started < .seconds(30) else { throw CLIError("ring \(number) did not reach every phone in 30 s") }
            try await Task.sleep(for: .microseconds(200))
        }
        let elapsed = ContinuousClock.now - started
        return Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    }

    /// The rings' latencies summed up, and whether every phone got every ring exactly once.
    func summary() -> (text: String, exact: Bool) {
        let sorted = self.latencies.withLock { $0 }.sorted()
        guard !sorted.isEmpty else { return ("doorbell: no ring completed", false) }
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int((p * Double(sorted.count)).rounded(.up)) - 1)] }
        let deliveries = self.phones.map { self.ledger.deliveries(of: $0) }
        let exact = deliveries.allSatisfy { $0 == sorted.count }
        let text = String(
            format: "doorbell: %d rings to 6 phones, request to APNs acceptance p50 %.1f ms, p99 %.1f ms, max %.1f ms; deliveries per phone %@",
            sorted.count, percentile(0.5), percentile(0.99), sorted.last!, deliveries.map(String.init).joined(separator: ",")
        )
        return (text + (exact ? " (each ring exactly once)" : " ✘ NOT exactly once per ring"), exact)
    }

    /// Lets the ring in flight finish (`ringing` is the task ``ringEverySecond(report:)`` gave),
    /// then stops the API and revokes the demo's key.
    func stop(_ ringing: Task<Void, Never>?) async {
        self.stopping.store(true, ordering: .relaxed)
        await ringing?.value
        await self.services.triggerGracefulShutdown()
        _ = await self.server.result
        try? await self.loop.shutdownGracefully()
        _ = try? await self.store.revokeAPIKey(self.key)
    }
}
