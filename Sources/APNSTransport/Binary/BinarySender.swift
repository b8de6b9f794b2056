public import APNSWire
public import Logging
public import NIOCore
public import PushFleetCore
import Synchronization

/// Sends notifications over one long-lived connection of the legacy binary provider protocol.
///
/// Frames (command 2) are written in batches of ``Configuration/batchSize`` with one flush each; the
/// event loop reads between batches, so an error response stops writing within a batch. The gateway
/// answers only failures, late, then closes and discards what followed; so the sender keeps every
/// frame not yet proven processed (see ``BinarySendWindow``) and, on an error response, reports the
/// frames before the failed one as accepted, the failed one as rejected, and writes exactly the
/// tail again on a fresh connection.
///
/// Silence proves nothing (a busy gateway may read a frame long after it was written), so after
/// ``Configuration/confirmEvery`` frames, or when the queue runs dry, the sender writes a sentinel
/// frame the gateway must reject; the rejection confirms every frame before it. A connection that
/// closes without an error response has its unconfirmed frames written again: re-sends are bounded
/// by ``Configuration/confirmEvery``.
///
/// All state lives on one event loop; the methods may be called from any task.
public final class BinarySender: NotificationSender {
    public let configuration: Configuration
    /// Outcomes, in the order they became known. Finishes after ``shutdown()``.
    public let events: AsyncStream<[DeliveryOutcome]>
    private let core: NIOLoopBoundBox<BinarySenderCore>
    private let eventLoop: any EventLoop
    private let pacing = FramesWanted()

    /// Frames this connection should be given per proof round to keep writing through the
    /// gateway's error delay: the tokens on hand for it should be at least this many. Measured
    /// from its rounds (see ``BinaryRoundPacer``); one batch until a round has been measured; at
    /// most ``Configuration/confirmEvery``. Readable from any thread.
    public var framesWanted: Int { self.pacing.value.load(ordering: .relaxed) }

    public init(configuration: Configuration, eventLoop: any EventLoop, logger: Logger = Logger(label: "pushfleet.binary-sender")) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        let (events, continuation) = AsyncStream.makeStream(of: [DeliveryOutcome].self)
        self.events = events
        var logger = logger
        logger[metadataKey: "apns.endpoint"] = "\(configuration.host):\(configuration.port)"
        // The core is made here and from then on touched only on `eventLoop`.
        self.core = NIOLoopBoundBox.makeBoxSendingValue(
            BinarySenderCore(configuration: configuration, eventLoop: eventLoop, events: continuation, framesWanted: self.pacing, logger: logger),
            eventLoop: eventLoop
        )
    }

    /// Queues notifications for sending. Suspends while ``Configuration/maximumQueued`` wait to be written.
    /// - Throws: ``TransportError`` if the sender was shut down.
    public func send(_ notifications: [BinaryNotification]) async throws {
        guard !notifications.isEmpty else { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            self.eventLoop.execute {
                self.core.value.enqueue(notifications, continuation: continuation)
            }
        }
    }

    /// Stops writing at `deadline` until a later one is set; `nil` (the default) never stops.
    ///
    /// A worker sets this to the end of its shard lease, as its own clock sees it, and moves it on
    /// after every checkpoint that renewed the lease. A process frozen past its lease (SIGSTOP, a
    /// long pause) then writes nothing more when it resumes, until its next checkpoint either
    /// renews the lease or reports it lost.
    public func setWriteDeadline(_ deadline: ContinuousClock.Instant?) {
        self.eventLoop.execute { self.core.value.setWriteDeadline(deadline) }
    }

    /// Takes back every notification for which `predicate` holds that was never written, and returns
    /// them in the order they were queued: no event will be reported for them. Frames written
    /// before and queued to be written again stay.
    public func withdraw(where predicate: @escaping @Sendable (BinaryNotification) -> Bool) async -> [BinaryNotification] {
        await self.eventLoop.suspend { $0.resume(returning: self.core.value.withdraw(where: predicate)) }
    }

    /// Returns once every queued notification has been accepted or rejected.
    public func flush() async {
        await self.eventLoop.suspend { self.core.value.whenFlushed($0) }
    }

    /// A reading of the counters.
    public func statistics() async -> Statistics {
        await self.eventLoop.suspend { $0.resume(returning: self.core.value.statistics) }
    }

    /// A proof round holds only the frames the sender has been given: enough of them that writing
    /// outlasts the wait for each proof (``framesWanted``).
    public var notificationsWanted: Int? { self.framesWanted }

    public func totals() async -> SenderTotals {
        let statistics = await self.statistics()
        var totals = SenderTotals()
        totals.connectionsOpened = statistics.connectionsOpened
        totals.requestTimeouts = statistics.confirmationTimeouts
        totals.resent = statistics.framesResentAfterSilentClose
        return totals
    }

    /// Closes the connection and returns, in order, every notification not yet accepted or rejected:
    /// the unconfirmed frames and those never written. ``events`` finishes.
    public func shutdown() async -> [BinaryNotification] {
        await self.eventLoop.suspend { $0.resume(returning: self.core.value.shutdown()) }
    }
}

/// The pacer's advice, written by the sender's event loop and read by the worker's slot.
final class FramesWanted: Sendable {
    let value = Atomic<Int>(0)
}
