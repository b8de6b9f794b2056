import APNSWire
import CoreMetrics
import DequeModule
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PushFleetCore
import Synchronization

/// The event-loop-confined half of ``BinarySender``: the queue, the window of unconfirmed frames,
/// and the connection's I/O. Every method runs on `eventLoop`.
///
/// A connection's life, as ``BinaryConnectionCycle`` decides it: connect (with backoff after
/// failures) → write batches until the round is full or the queue stays empty for the linger time
/// → write a sentinel → wait for an error response → settle the window → reconnect. An invalid
/// notification ends the connection the same way, earlier.
final class BinarySenderCore {
    /// A notification, and the times its fate was left unknown (a connection closed without an
    /// answer, an error response naming no frame of its round, a round never proven).
    struct Pending {
        var notification: BinaryNotification
        var misses = 0
        /// ``BinarySenderCore/proven`` at its first miss: whether rounds were proven since tells a
        /// frame of its own that never gets through from a gateway that proves nothing.
        var provenAtFirstMiss: Int? = nil
    }

    private let configuration: BinarySender.Configuration
    private let eventLoop: any EventLoop
    private let events: AsyncStream<[DeliveryOutcome]>.Continuation
    private let logger: Logger
    private let encoder = BinaryFrameEncoder()
    private let sslContext: Result<NIOSSLContext, any Error>

    private var queue: Deque<Pending> = []
    /// Frames proven processed (accepted or rejected by an error response naming a later one).
    private var proven = 0
    /// The first this many of ``queue`` were written before (re-queued after an error response or a
    /// silent close); the rest were never written.
    private var writtenAtFront = 0
    /// Written frames not yet settled; `nil` marks the sentinel.
    private var window = BinarySendWindow<Pending?>()
    /// The connection's decisions: generation, backoff, round size, pacing.
    private var cycle: BinaryConnectionCycle
    /// The channel of the connection writing or awaiting proof.
    private var channel: (any Channel)?
    private var random = SystemRandomNumberGenerator()
    private var nextIdentifier: UInt32 = 1
    /// Where the pacer's advice is published for the worker.
    private let framesWanted: FramesWanted
    private var writeScheduled = false
    /// No frame is written at or after this time (the worker's lease, by its own clock).
    private var writeDeadline: ContinuousClock.Instant?
    private var lingerTimer: Scheduled<Void>?
    private var proofTimer: Scheduled<Void>?
    /// Armed while the connection takes no bytes (not writable: with the one-byte watermark, the
    /// last batch has not left for the kernel) with frames unconfirmed; writability cancels it.
    private var stallTimer: Scheduled<Void>?
    /// How long the next sentinel's answer is awaited: the configured time, doubled after each
    /// timeout (up to 8 times), so that a gateway slower than the configuration is still proven.
    private var proofTimeout: TimeAmount
    private var waiters: SenderWaiters
    private(set) var statistics = BinarySender.Statistics()
    private let metrics = TransportMetrics.binary
    /// Counters of error responses, by status: made once each.
    private var errorResponseCounters: [UInt8: Counter] = [:]

    init(
        configuration: BinarySender.Configuration,
        eventLoop: any EventLoop,
        events: AsyncStream<[DeliveryOutcome]>.Continuation,
        framesWanted: FramesWanted,
        logger: Logger
    ) {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.events = events
        self.logger = logger
        self.sslContext = Result { try NIOSSLContext(configuration: configuration.tls) }
        self.cycle = BinaryConnectionCycle(
            backoff: configuration.backoff, confirmEvery: configuration.confirmEvery, batchSize: configuration.batchSize
        )
        self.framesWanted = framesWanted
        self.proofTimeout = configuration.confirmationTimeout
        self.waiters = SenderWaiters(limit: configuration.maximumQueued)
        framesWanted.value.store(self.cycle.pacer.framesWanted, ordering: .relaxed)
    }

    // MARK: - Calls from BinarySender

    func enqueue(_ notifications: [BinaryNotification], continuation: CheckedContinuation<Void, any Error>) {
        if case .shutdown = self.cycle.state {
            continuation.resume(throwing: TransportError.senderClosed(host: self.configuration.host, port: self.configuration.port))
            return
        }
        self.queue.append(contentsOf: notifications.lazy.map { Pending(notification: $0) })
        self.waiters.admit(continuation, waiting: self.queue.count)
        self.connectIfNeeded()
        self.scheduleWrite()
    }

    func setWriteDeadline(_ deadline: ContinuousClock.Instant?) {
        self.writeDeadline = deadline
        self.scheduleWrite()
        if self.queue.isEmpty { self.scheduleLinger() }
    }

    private var mayWrite: Bool {
        guard let deadline = self.writeDeadline else { return true }
        return ContinuousClock.now < deadline
    }

    private var isIdle: Bool { self.queue.isEmpty && self.window.isEmpty }

    func whenFlushed(_ continuation: CheckedContinuation<Void, Never>) {
        self.waiters.flush(continuation, idle: self.isIdle)
    }

    func shutdown() -> [BinaryNotification] {
        switch self.cycle.state {
        case .writing, .awaitingProof, .closing:
            self.channel?.close(promise: nil)
            self.metrics.connections.decrement()
        case .idle, .connecting, .shutdown:
            break
        }
        self.channel = nil
        self.cycle.shutdown()
        self.cancelTimers()
        let remaining = self.window.connectionLost().compactMap { $0?.notification } + self.queue.map(\.notification)
        self.queue.removeAll()
        self.writtenAtFront = 0
        self.waiters.close(TransportError.senderClosed(host: self.configuration.host, port: self.configuration.port))
        self.events.finish()
        return remaining
    }

    /// Takes out of the queue every notification never written for which `predicate` holds, and
    /// returns them in queue order. Those re-queued after being written stay.
    func withdraw(where predicate: (BinaryNotification) -> Bool) -> [BinaryNotification] {
        let withdrawn = self.queue.extract(from: self.writtenAtFront) { predicate($0.notification) }.map(\.notification)
        guard !withdrawn.isEmpty else { return [] }
        self.statistics.withdrawn += withdrawn.count
        self.resumeWaiters()
        return withdrawn
    }

    // MARK: - Connecting

    private func connectIfNeeded() {
        guard let connect = self.cycle.connectIfNeeded(hasWork: !self.queue.isEmpty, using: &self.random) else { return }
        let generation = connect.generation
        if connect.delay == 0 {
            self.connect(generation: generation)
        } else {
            self.logger.debug(
                "reconnecting after backoff", metadata: ["delay_ms": "\(connect.delay / 1_000_000)", "attempt": "\(self.cycle.failedAttempts)"]
            )
            let core = NIOLoopBound(self, eventLoop: self.eventLoop)
            self.eventLoop.scheduleTask(in: .nanoseconds(Int64(clamping: connect.delay))) { core.value.connect(generation: generation) }
        }
    }

    private func connect(generation: Int) {
        guard self.cycle.state == .connecting(generation: generation) else { return }
        let sslContext: NIOSSLContext
        switch self.sslContext {
        case .success(let context): sslContext = context
        case .failure(let error):
            self.connectFailed(generation: generation, error: error)
            return
        }
        let hostname = self.configuration.serverHostname ?? self.configuration.host
        let isIPAddress = (try? SocketAddress(ipAddress: hostname, port: 0)) != nil
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        let connectTimeout = self.configuration.connectTimeout
        ClientBootstrap(group: self.eventLoop)
            .connectTimeout(connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            // Write a batch only when NIO holds nothing unsent, so that at most one batch waits in
            // this process when the kernel's buffer is full. A process frozen past its lease can
            // then flush at most that one batch, written before the lease ran out, when it resumes.
            .channelOption(.writeBufferWaterMark, value: .init(low: 1, high: 1))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        try NIOSSLClientHandler(context: sslContext, serverHostname: isIPAddress ? nil : hostname)
                    )
                    try channel.pipeline.syncOperations.addHandler(HandshakeTimeout(timeout: connectTimeout))
                    try channel.pipeline.syncOperations.addHandler(ByteToMessageHandler(BinaryErrorResponseDecoder()))
                    try channel.pipeline.syncOperations.addHandler(BinaryConnectionHandler(core: core.value, generation: generation))
                }
            }
            .connect(host: self.configuration.host, port: self.configuration.port)
            .whenFailure { error in core.value.connectFailed(generation: generation, error: error) }
    }

    private func connectFailed(generation: Int, error: any Error) {
        guard self.cycle.connectFailed(generation: generation) else { return }
        self.statistics.connectFailures += 1
        self.metrics.connectFailures.increment()
        let failure = TransportError.connectionFailed(host: self.configuration.host, port: self.configuration.port, underlying: error)
        self.logger.warning("cannot connect to the binary gateway", metadata: ["error": "\(failure)"])
        var outcomes: [DeliveryOutcome] = []
        self.refuseWaitingIfUnreachable(error, connected: false, unconfirmed: [], into: &outcomes)
        if !outcomes.isEmpty { self.events.yield(outcomes) }
        self.connectIfNeeded()
        self.resumeWaiters()
    }

    // MARK: - Calls from BinaryConnectionHandler

    func connectionReady(_ channel: any Channel, generation: Int) {
        guard self.cycle.ready(generation: generation, now: NIODeadline.now().uptimeNanoseconds) else {
            channel.close(promise: nil)
            return
        }
        self.channel = channel
        self.framesWanted.value.store(self.cycle.pacer.framesWanted, ordering: .relaxed)
        self.statistics.connectionsOpened += 1
        self.metrics.connections.increment()
        self.scheduleWrite()
    }

    func writabilityChanged(generation: Int) {
        guard self.cycle.writingGeneration == generation else { return }
        if self.channel?.isWritable == true {
            self.stallTimer?.cancel()
            self.stallTimer = nil
        }
        self.scheduleWrite()
    }

    private func errorResponseCounter(_ status: BinaryStatus) -> Counter {
        if let counter = self.errorResponseCounters[status.rawValue] { return counter }
        let counter = TransportMetrics.binaryErrorResponses(status: status.rawValue)
        self.errorResponseCounters[status.rawValue] = counter
        return counter
    }

    func errorResponse(_ response: BinaryErrorResponse, generation: Int) {
        guard self.cycle.errorResponseArrived(generation: generation) else { return }
        self.cancelTimers()
        self.statistics.errorResponses += 1
        self.errorResponseCounter(response.status).increment()
        let resolution = self.window.resolve(response)
        var outcomes = self.accept(resolution.accepted.compactMap { $0?.notification })
        // A rejected sentinel (nil) is the proof we asked for, not a notification's outcome.
        var rejectedNotification = false
        if let rejected = resolution.rejected, let notification = rejected?.notification {
            rejectedNotification = true
            self.statistics.rejected += 1
            outcomes.append(.rejected(tag: notification.tag, Rejection(token: notification.token, reason: response.status.reason)))
        }
        self.proven += resolution.accepted.count + (resolution.rejected == nil ? 0 : 1)
        if resolution.identifierMatched { self.proofTimeout = self.configuration.confirmationTimeout }
        self.cycle.settled(
            identifierMatched: resolution.identifierMatched, rejectedNotification: rejectedNotification, resent: resolution.resend.count
        )
        var resend = resolution.resend.compactMap { $0 }
        if !resolution.identifierMatched {
            // Nothing is known of the round: like a silent close, each frame may have been delivered.
            self.statistics.unmatchedErrors += 1
            self.statistics.framesResentAfterSilentClose += resend.count
            self.logger.warning(
                "error response names no unconfirmed frame; writing the whole window again",
                metadata: ["status": "\(response.status)", "identifier": "\(response.identifier)", "frames": "\(resend.count)"]
            )
            resend = self.missedAnswers(resend, into: &outcomes)
        }
        if !outcomes.isEmpty { self.events.yield(outcomes) }
        self.requeue(resend)
        // The window is settled, so the connection ends in the cycle now, before its close (which is
        // then about an older generation): a gateway that leaves it open would otherwise hold every
        // round for NIOSSL's shutdown timeout (5 s).
        if self.cycle.closed(generation: generation, unconfirmed: 0) == .afterErrorResponse { self.metrics.connections.decrement() }
        self.channel?.close(promise: nil)
        self.channel = nil
        self.connectIfNeeded()
        self.resumeWaiters()
    }

    func connectionClosed(generation: Int, error: (any Error)?) {
        let unconfirmed = self.cycle.holdsUnconfirmedFrames(generation: generation) ? self.window.connectionLost().compactMap { $0 } : []
        var outcomes: [DeliveryOutcome] = []
        switch self.cycle.closed(generation: generation, unconfirmed: unconfirmed.count) {
        case .ignored:
            return  // an older connection
        case .failedToConnect:
            // TCP connected but TLS never completed.
            self.statistics.connectFailures += 1
            self.metrics.connectFailures.increment()
            let failure = TransportError.connectionFailed(
                host: self.configuration.host, port: self.configuration.port, underlying: error.map { "\($0)" } ?? "closed during the TLS handshake"
            )
            self.logger.warning("TLS handshake with the binary gateway failed", metadata: ["error": "\(failure)"])
            self.refuseWaitingIfUnreachable(error, connected: false, unconfirmed: [], into: &outcomes)
        case .lost:
            self.metrics.connections.decrement()
            if !unconfirmed.isEmpty {
                self.statistics.silentCloses += 1
                self.statistics.framesResentAfterSilentClose += unconfirmed.count
                if !self.refuseWaitingIfUnreachable(error, connected: true, unconfirmed: unconfirmed, into: &outcomes) {
                    var metadata: Logger.Metadata = ["frames": "\(unconfirmed.count)"]
                    if let error { metadata["error"] = "\(error)" }
                    self.logger.info("connection closed without an error response; writing its unconfirmed frames again", metadata: metadata)
                    self.requeue(self.missedAnswers(unconfirmed, into: &outcomes))
                }
            }
        case .afterErrorResponse:
            // Not reached from here: ``errorResponse(_:generation:)`` ends the connection in the
            // cycle before it closes it.
            self.metrics.connections.decrement()
        }
        if !outcomes.isEmpty { self.events.yield(outcomes) }
        self.channel = nil
        self.cancelTimers()
        self.connectIfNeeded()
        // Frames whose attempts ran out were settled here: a flush may be due.
        self.resumeWaiters()
    }

    // MARK: - Writing

    private func scheduleWrite() {
        guard !self.writeScheduled, self.cycle.writingGeneration != nil, !self.queue.isEmpty else { return }
        self.writeScheduled = true
        // Through the task queue, so that the loop reads (an error response) between two batches.
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        self.eventLoop.execute { core.value.writeBatch() }
    }

    private func writeBatch() {
        self.writeScheduled = false
        guard let generation = self.cycle.writingGeneration, let channel = self.channel, self.mayWrite else { return }
        guard channel.isWritable else {
            self.watchForStall(generation: generation)
            return
        }
        let count = min(self.configuration.batchSize, self.queue.count, self.cycle.room(unconfirmed: self.window.count))
        if count > 0 {
            self.lingerTimer?.cancel()
            self.lingerTimer = nil
            if self.window.isEmpty { self.cycle.roundStarted(now: NIODeadline.now().uptimeNanoseconds) }
            var buffer = channel.allocator.buffer(
                capacity: count * BinaryFrameEncoder.frameSize(tokenByteCount: 32, payloadByteCount: self.queue[0].notification.payload.byteCount)
            )
            for _ in 0..<count {
                let pending = self.queue.removeFirst()
                self.writtenAtFront = max(0, self.writtenAtFront - 1)
                let identifier = self.takeIdentifier()
                self.encoder.writeCommand2(identifier: identifier, notification: pending.notification, into: &buffer)
                self.window.written(pending, identifier: identifier)
            }
            self.statistics.framesWritten += count
            channel.writeAndFlush(buffer, promise: nil)
            self.resumeWaiters()
        }
        if self.cycle.roundIsFull(unconfirmed: self.window.count) {
            self.writeSentinel()
        } else if self.queue.isEmpty {
            self.scheduleLinger()
        } else {
            self.scheduleWrite()
        }
    }

    /// Writes the frame the gateway must reject, and stops writing until its answer.
    private func writeSentinel() {
        // No write deadline here: the sentinel delivers nothing, and its answer settles frames
        // written before the deadline.
        guard let channel = self.channel, !self.window.isEmpty,
            let generation = self.cycle.sentinelWritten(frames: self.window.count, now: NIODeadline.now().uptimeNanoseconds)
        else { return }
        self.lingerTimer?.cancel()
        self.lingerTimer = nil
        let identifier = self.takeIdentifier()
        var buffer = channel.allocator.buffer(capacity: 64)
        self.encoder.writeSentinel(identifier: identifier, into: &buffer)
        self.window.written(nil, identifier: identifier)
        self.statistics.sentinels += 1
        channel.writeAndFlush(buffer, promise: nil)
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        self.proofTimer = self.eventLoop.scheduleTask(in: self.proofTimeout) {
            core.value.proofTimedOut(generation: generation)
        }
    }

    /// The connection takes no bytes: if it stays unwritable for the proof timeout while frames
    /// are unconfirmed, it is given up like an unanswered sentinel (a gateway that stopped reading
    /// would otherwise hold them for ever; no sentinel can go out behind them).
    private func watchForStall(generation: Int) {
        guard self.stallTimer == nil, !self.window.isEmpty else { return }
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        self.stallTimer = self.eventLoop.scheduleTask(in: self.proofTimeout) {
            let core = core.value
            core.stallTimer = nil
            guard core.cycle.writingGeneration == generation, let channel = core.channel, !channel.isWritable, !core.window.isEmpty else { return }
            core.statistics.confirmationTimeouts += 1
            core.metrics.requestTimeouts.increment()
            core.logger.warning(
                "the binary gateway takes no bytes; closing the connection and writing its unconfirmed frames again",
                metadata: ["timeout_ms": "\(core.proofTimeout.nanoseconds / 1_000_000)", "frames": "\(core.window.count)"]
            )
            core.waitLonger()
            // Nothing more is written to it while its TLS shutdown waits for a peer that reads nothing.
            core.channel = nil
            channel.close(promise: nil)  // connectionClosed re-queues the window
        }
    }

    private func scheduleLinger() {
        guard self.lingerTimer == nil, self.cycle.writingGeneration != nil, !self.window.isEmpty else { return }
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        self.lingerTimer = self.eventLoop.scheduleTask(in: self.configuration.linger) {
            let core = core.value
            core.lingerTimer = nil
            if core.queue.isEmpty { core.writeSentinel() } else { core.scheduleWrite() }
        }
    }

    private func proofTimedOut(generation: Int) {
        guard self.cycle.proofOverdue(generation: generation), let channel = self.channel else { return }
        self.statistics.confirmationTimeouts += 1
        self.metrics.requestTimeouts.increment()
        self.logger.warning(
            "no answer to the sentinel frame; closing the connection and writing its unconfirmed frames again",
            metadata: ["timeout_ms": "\(self.proofTimeout.nanoseconds / 1_000_000)"]
        )
        self.waitLonger()
        channel.close(promise: nil)  // connectionClosed re-queues the window
    }

    /// The gateway may just be slower than the timeout: the next wait is twice as long, up to 8
    /// times the configured one (a proof brings it back).
    private func waitLonger() {
        self.proofTimeout = min(self.proofTimeout * 2, self.configuration.confirmationTimeout * 8)
    }

    private func takeIdentifier() -> UInt32 {
        let identifier = self.nextIdentifier
        self.nextIdentifier = identifier == UInt32.max ? 1 : identifier + 1
        return identifier
    }

    /// Counts a miss for each of `frames`, whose fate is unknown, and returns those with attempts
    /// left, to be written again. One out of attempts has its final outcome in `outcomes`
    /// (``DeliveryOutcome/unanswered(tag:token:_:othersAnswered:)``, "others answered" being
    /// rounds proven since its first miss); frames that shared its rounds every time share it.
    private func missedAnswers(_ frames: [Pending], into outcomes: inout [DeliveryOutcome]) -> [Pending] {
        var again: [Pending] = []
        again.reserveCapacity(frames.count)
        for var pending in frames {
            pending.misses += 1
            let since = pending.provenAtFirstMiss ?? self.proven
            pending.provenAtFirstMiss = since
            guard pending.misses >= self.configuration.maximumAttempts else {
                again.append(pending)
                continue
            }
            self.statistics.rejected += 1
            outcomes.append(
                .unanswered(tag: pending.notification.tag, token: pending.notification.token, .connectionLost, othersAnswered: self.proven != since)
            )
        }
        return again
    }

    /// After a connection failed (`connected`: after its TLS handshake, leaving `unconfirmed`
    /// frames): once ``BinarySender/Configuration/maximumAttempts`` connections in a row ended
    /// before proving anything, nothing waiting can go, so the unconfirmed frames and the queue are
    /// refused with why (``GatewayFailure``); and so is whatever waits at each further failure,
    /// until a round is proven. - Returns: whether it refused them (the caller then re-queues nothing).
    @discardableResult
    private func refuseWaitingIfUnreachable(
        _ error: (any Error)?, connected: Bool, unconfirmed: [Pending], into outcomes: inout [DeliveryOutcome]
    ) -> Bool {
        guard self.cycle.failedAttempts >= self.configuration.maximumAttempts else { return false }
        let waiting = unconfirmed + self.queue
        self.queue.removeAll()
        self.writtenAtFront = 0
        guard !waiting.isEmpty else { return true }
        let refusal = GatewayFailure.refusal(error, host: self.configuration.host, port: self.configuration.port, connected: connected)
        self.logger.error(
            "connections to the binary gateway keep failing; refusing the notifications waiting for one",
            metadata: ["refusal": "\(refusal)", "notifications": "\(waiting.count)", "failed_connections": "\(self.cycle.failedAttempts)"]
        )
        self.statistics.rejected += waiting.count
        for pending in waiting { outcomes.append(.refused(tag: pending.notification.tag, token: pending.notification.token, refusal)) }
        return true
    }

    private func requeue(_ notifications: [Pending]) {
        guard !notifications.isEmpty else { return }
        self.statistics.framesResent += notifications.count
        self.queue.insert(contentsOf: notifications, at: 0)
        self.writtenAtFront += notifications.count
    }

    private func cancelTimers() {
        self.lingerTimer?.cancel()
        self.lingerTimer = nil
        self.proofTimer?.cancel()
        self.proofTimer = nil
        self.stallTimer?.cancel()
        self.stallTimer = nil
    }

    // MARK: - Reporting

    /// Counts `notifications` as accepted and returns their outcomes, for the caller to report.
    private func accept(_ notifications: [BinaryNotification]) -> [DeliveryOutcome] {
        self.statistics.accepted += notifications.count
        return notifications.map { .accepted(tag: $0.tag) }
    }

    private func resumeWaiters() {
        self.waiters.resume(waiting: self.queue.count, idle: self.isIdle)
    }
}
