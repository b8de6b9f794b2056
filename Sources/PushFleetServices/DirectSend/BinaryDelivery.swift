public import APNSTransport
import APNSWire
public import Logging
public import PushFleetCore
import Synchronization

/// Sends a stream of tokens over `connections` binary senders at once and tallies what APNs said.
public struct BinaryDelivery: Sendable {
    public struct Result: DeliveryTally, Sendable {
        public var accepted = 0
        public var rejections: [Rejection] = []
        public var outages = 0
        public var refusals: [RejectionReason: Int] = [:]
        public var statistics = BinarySender.Statistics()
        public var unsettled = 0
    }

    let configuration: BinarySender.Configuration
    let connections: Int
    let payload: Payload
    let priority: UInt8
    let expiration: UInt32
    let logger: Logger

    public init(
        configuration: BinarySender.Configuration, connections: Int, payload: Payload, priority: UInt8 = 10, expiration: UInt32 = 0,
        logger: Logger = Logger(label: "pushfleet.send")
    ) {
        self.configuration = configuration
        self.connections = connections
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
        self.logger = logger
    }

    /// Sends every token `next` yields (an empty batch ends the stream), calling `progress` with the
    /// number of settled notifications about four times a second.
    public func run(next: () throws -> [DeviceToken], progress: @escaping @Sendable (Int) -> Void) async throws -> Result {
        let tally = Tally()
        let senders = (0..<self.connections).map { _ in
            BinarySender(configuration: self.configuration, on: .shared, logger: self.logger)
        }
        let collectors = senders.map { sender in
            Task {
                for await outcomes in sender.events {
                    tally.withLock { $0.count(outcomes) }
                }
            }
        }
        let reporter = Task {
            while !Task.isCancelled {
                progress(tally.withLock { $0.accepted + $0.rejections.count })
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        defer { reporter.cancel() }

        var turn = 0
        var tag: UInt64 = 0
        while true {
            let tokens = try next()
            if tokens.isEmpty { break }
            let notifications = tokens.map { token in
                defer { tag += 1 }
                return BinaryNotification(token: token, payload: self.payload, expiration: self.expiration, priority: self.priority, tag: tag)
            }
            try await senders[turn % senders.count].send(notifications)
            turn += 1
        }
        var unsettled = 0
        var statistics = BinarySender.Statistics()
        for sender in senders {
            await sender.flush()
            statistics.add(await sender.statistics())
            unsettled += await sender.shutdown().count
        }
        for collector in collectors { await collector.value }
        progress(tally.withLock { $0.accepted + $0.rejections.count })
        return tally.withLock { result in
            result.statistics = statistics
            result.unsettled = unsettled
            return result
        }
    }
}

/// The running result, shared by the event collectors and the progress reporter.
private final class Tally: Sendable {
    private let result = Mutex(BinaryDelivery.Result())

    func withLock<T>(_ body: (inout BinaryDelivery.Result) -> T) -> T {
        self.result.withLock { body(&$0) }
    }
}

extension BinarySender.Statistics {
    mutating func add(_ other: Self) {
        self.framesWritten += other.framesWritten
        self.framesResent += other.framesResent
        self.framesResentAfterSilentClose += other.framesResentAfterSilentClose
        self.accepted += other.accepted
        self.rejected += other.rejected
        self.connectionsOpened += other.connectionsOpened
        self.errorResponses += other.errorResponses
        self.sentinels += other.sentinels
        self.silentCloses += other.silentCloses
        self.connectFailures += other.connectFailures
        self.unmatchedErrors += other.unmatchedErrors
        self.confirmationTimeouts += other.confirmationTimeouts
    }
}
