public import APNSTransport
public import APNSWire
public import Logging
public import PushFleetCore
import Synchronization

/// Sends a stream of tokens through one ``HTTP2Sender`` (a pool of `connections`) and tallies
/// what APNs said.
public struct HTTP2Delivery: Sendable {
    public struct Result: DeliveryTally, Sendable {
        public var accepted = 0
        public var rejections: [Rejection] = []
        public var outages = 0
        public var refusals: [RejectionReason: Int] = [:]
        public var statistics = HTTP2Sender.Statistics()
        public var unsettled = 0
    }

    let configuration: HTTP2Sender.Configuration
    let template: HTTP2NotificationTemplate
    /// After this long the sender is shut down and what has no answer yet is unsettled (the sender
    /// itself keeps reconnecting to an APNs that is down).
    let timeout: Duration
    let logger: Logger

    public init(
        configuration: HTTP2Sender.Configuration, template: HTTP2NotificationTemplate, timeout: Duration,
        logger: Logger = Logger(label: "pushfleet.send")
    ) {
        self.configuration = configuration
        self.template = template
        self.timeout = timeout
        self.logger = logger
    }

    /// Sends every token `next` yields (an empty batch ends the stream) and returns once each has
    /// an answer, or at the timeout (the rest counted in ``Result/unsettled``).
    public func run(next: () throws -> [DeviceToken]) async throws -> Result {
        let sender = try HTTP2Sender(configuration: self.configuration, on: .shared, logger: self.logger)
        let tally = Mutex(Result())
        let collector = Task {
            for await outcomes in sender.events {
                tally.withLock { $0.count(outcomes) }
            }
        }
        let timeout = self.timeout
        let watchdog = Task { () -> Bool in
            try? await Task.sleep(for: timeout)
            guard !Task.isCancelled else { return false }
            _ = await sender.shutdown()
            return true
        }
        var handed = 0
        do {
            while true {
                let tokens = try next()
                if tokens.isEmpty { break }
                let notifications = tokens.enumerated().map { offset, token in
                    HTTP2Notification(token: token, tag: UInt64(handed + offset), template: self.template)
                }
                handed += notifications.count
                try await sender.send(notifications)
            }
            await sender.flush()
        } catch {
            // A sender shut down by the watchdog refuses the rest of the file: unsettled, not an error.
            watchdog.cancel()
            let timedOut = await watchdog.value
            if !(timedOut && error is TransportError) {
                _ = await sender.shutdown()
                await collector.value
                throw error
            }
        }
        watchdog.cancel()
        let statistics = await sender.statistics()
        _ = await sender.shutdown()
        await collector.value
        // Each notification handed over has one event, unless it was never answered.
        return tally.withLock { result in
            result.statistics = statistics
            result.unsettled = handed - result.accepted - result.rejections.count
            return result
        }
    }
}
