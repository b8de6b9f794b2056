public import APNSWire
public import Logging
public import NIOCore
public import PushFleetCore

/// Sends notifications to APNs over the HTTP/2 provider API: a pool of long-lived TLS connections,
/// each kept busy up to the server's stream limit.
///
/// Each connection is framed by ``HTTP2ClientFramer`` right after TLS: HEADERS and DATA for many
/// streams written into one buffer, then one flush. The stable headers, `authorization` included,
/// are identical on every request so HPACK indexes them; only `:path` changes. Each answer is classified by
/// ``HTTP2Verdict``: accepted and final rejections are reported through ``events``; retryable ones
/// are sent again after a backoff (429 delays only its token), bounded by
/// ``Configuration/maximumAttempts``. A GOAWAY retires its connection: streams above the last
/// stream id go to another connection, the rest finish. A connection that ends, or whose answers
/// stop coming (``Configuration/requestTimeout``), has its streams sent again elsewhere, counted
/// in ``Statistics/resentAfterConnectionLoss``.
///
/// All state lives on one event loop; the methods may be called from any task.
public final class HTTP2Sender: NotificationSender {
    public let configuration: Configuration
    /// Outcomes, in the order they became known: one batch per read of a connection (however
    /// many answers it held, accepted and rejected mixed), so a stale audience costs no more
    /// hand-offs than a clean one. A final answer about the provider or APNs rather than the
    /// token (``HTTP2Rejection/isProviderLevel``) is reported as a refusal. Finishes after ``shutdown()``.
    public let events: AsyncStream<[DeliveryOutcome]>
    private let core: NIOLoopBoundBox<HTTP2SenderCore>
    private let eventLoop: any EventLoop

    /// - Throws: ``TransportError`` if the TLS files cannot be used.
    public init(configuration: Configuration, eventLoop: any EventLoop, logger: Logger = Logger(label: "pushfleet.http2-sender")) throws {
        self.configuration = configuration
        self.eventLoop = eventLoop
        let tls = try configuration.tls.makeConfiguration(applicationProtocols: ["h2"])
        let (events, continuation) = AsyncStream.makeStream(of: [DeliveryOutcome].self)
        self.events = events
        var logger = logger
        logger[metadataKey: "apns.endpoint"] = "\(configuration.host):\(configuration.port)"
        // The core is made here and from then on touched only on `eventLoop`.
        self.core = NIOLoopBoundBox.makeBoxSendingValue(
            try HTTP2SenderCore(configuration: configuration, tls: tls, eventLoop: eventLoop, events: continuation, logger: logger),
            eventLoop: eventLoop
        )
        if configuration.keepsConnectionsOpen {
            let core = self.core
            eventLoop.execute { core.value.openConnectionsIfNeeded() }
        }
    }

    /// Queues notifications for sending. Suspends while ``Configuration/maximumQueued`` wait to be written.
    /// - Throws: ``TransportError`` if the sender was shut down.
    public func send(_ notifications: [HTTP2Notification]) async throws {
        guard !notifications.isEmpty else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            self.eventLoop.execute { self.core.value.enqueue(notifications, continuation: continuation) }
        }
    }

    /// Opens no stream at or after `deadline` until a later one is set; `nil` (the default) never stops.
    /// Streams already open still get their answers. A worker sets this to the end of its shard lease.
    public func setWriteDeadline(_ deadline: ContinuousClock.Instant?) {
        self.eventLoop.execute { self.core.value.setWriteDeadline(deadline) }
    }

    /// Takes back every notification for which `predicate` holds that was never written, and returns
    /// them in the order they were queued: no event will be reported for them. A worker that stops
    /// a shard early (a drain, a pause) withdraws its unwritten tail instead of waiting for it to be
    /// sent. Notifications written before and waiting to be sent again stay queued.
    public func withdraw(where predicate: @escaping @Sendable (HTTP2Notification) -> Bool) async -> [HTTP2Notification] {
        await self.eventLoop.suspend { $0.resume(returning: self.core.value.withdraw(where: predicate)) }
    }

    /// Returns once every queued notification has been accepted or rejected.
    public func flush() async {
        await self.eventLoop.suspend { self.core.value.whenFlushed($0) }
    }

    /// A reading of the counters.
    public func statistics() async -> Statistics {
        await self.eventLoop.suspend { $0.resume(returning: self.core.value.currentStatistics) }
    }

    /// Answers come per request: the configured shards keep the streams full.
    public var notificationsWanted: Int? { nil }

    public func totals() async -> SenderTotals {
        let statistics = await self.statistics()
        var totals = SenderTotals()
        totals.connectionsOpened = statistics.connectionsOpened
        totals.requestTimeouts = statistics.requestTimeouts
        totals.resent = statistics.resentAfterConnectionLoss
        totals.retried = statistics.retries
        return totals
    }

    /// Closes every connection and returns every notification not yet accepted or rejected: those
    /// in flight (their answers will not be read), those waiting for a retry, and those never
    /// written. ``events`` finishes.
    public func shutdown() async -> [HTTP2Notification] {
        await self.eventLoop.suspend { $0.resume(returning: self.core.value.shutdown()) }
    }
}
