import APNSWire
import DequeModule
import CoreMetrics
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import PushFleetCore

/// The event-loop-confined half of ``HTTP2Sender``: the queue, the pool of connections, retries and
/// counters. Every method runs on `eventLoop`.
///
/// A connection's life: opened (the pool's connections ``HTTP2Sender/Configuration/connectionSpacing``
/// apart at first, then after a backoff if the last one failed) → streams opened up to the limit,
/// refilled after every read → retired (GOAWAY, expired provider token, repeated 500s): no new
/// streams, a replacement opened at once, closed when its streams are answered → or lost: its
/// streams go back to the front of the queue.
final class HTTP2SenderCore {
    /// A notification and the retryable answers it has had.
    struct Pending {
        var notification: HTTP2Notification
        var failures: Int
        /// Whether it was ever written: only notifications never written may be withdrawn.
        var written = false
    }

    private let configuration: HTTP2Sender.Configuration
    private let eventLoop: any EventLoop
    private let events: AsyncStream<[DeliveryOutcome]>.Continuation
    private let logger: Logger
    private let sslContext: NIOSSLContext
    private let signer: ProviderTokenSigner?
    private let authority: String

    private var queue: Deque<Pending> = []
    /// Notifications waiting out a retry delay, by a number of their own.
    private var delayed: [Int: (pending: Pending, task: Scheduled<Void>)] = [:]
    private var nextDelayedID = 0
    /// The connection filling each position of the pool (connecting or ready); `nil` for none.
    private var positions: [HTTP2Connection?]
    /// Consecutive failed connections per position: the backoff attempt.
    private var positionFailures: [Int]
    /// Every connection not yet closed: the positions' plus retired ones finishing their streams.
    private var connections: [ObjectIdentifier: HTTP2Connection] = [:]
    /// When the pool first opened: position `i` opens no sooner than `i × spacing` after it.
    private var poolStart: NIODeadline?
    private var isShutdown = false
    private var fillScheduled = false
    private var writeDeadline: ContinuousClock.Instant?
    /// Outcomes not yet handed to ``HTTP2Sender/events``: a batch per read.
    private var outcomes: [DeliveryOutcome] = []
    private var emitScheduled = false
    private var waiters: SenderWaiters
    private var statistics = HTTP2Sender.Statistics()
    private let metrics = TransportMetrics.http2
    /// Counters of answers other than 200, by status: made once each.
    private var answerCounters: [Int: Counter] = [:]

    init(
        configuration: HTTP2Sender.Configuration,
        tls: TLSConfiguration,
        eventLoop: any EventLoop,
        events: AsyncStream<[DeliveryOutcome]>.Continuation,
        logger: Logger
    ) throws {
        self.configuration = configuration
        self.eventLoop = eventLoop
        self.events = events
        self.logger = logger
        do {
            self.sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw TransportError.unusableCredential(what: "TLS configuration", path: configuration.host, underlying: error)
        }
        if case .providerToken(let signer) = configuration.authentication.base { self.signer = signer } else { self.signer = nil }
        let hostname = configuration.serverHostname ?? configuration.host
        self.authority = configuration.port == 443 ? hostname : "\(hostname):\(configuration.port)"
        self.positions = Array(repeating: nil, count: configuration.connections)
        self.positionFailures = Array(repeating: 0, count: configuration.connections)
        self.waiters = SenderWaiters(limit: configuration.maximumQueued)
    }

    var currentStatistics: HTTP2Sender.Statistics {
        var statistics = self.statistics
        statistics.providerTokensSigned = self.signer?.tokensSigned ?? 0
        return statistics
    }

    // MARK: - Calls from HTTP2Sender

    func enqueue(_ notifications: [HTTP2Notification], continuation: CheckedContinuation<Void, any Error>) {
        guard !self.isShutdown else {
            continuation.resume(throwing: TransportError.senderClosed(host: self.configuration.host, port: self.configuration.port))
            return
        }
        self.queue.append(contentsOf: notifications.lazy.map { Pending(notification: $0, failures: 0) })
        self.waiters.admit(continuation, waiting: self.waiting)
        self.openConnectionsIfNeeded()
        self.scheduleFill()
    }

    func setWriteDeadline(_ deadline: ContinuousClock.Instant?) {
        self.writeDeadline = deadline
        self.scheduleFill()
    }

    func whenFlushed(_ continuation: CheckedContinuation<Void, Never>) {
        self.waiters.flush(continuation, idle: self.isIdle || self.isShutdown)
    }

    func shutdown() -> [HTTP2Notification] {
        guard !self.isShutdown else { return [] }
        self.isShutdown = true
        var remaining: [HTTP2Notification] = []
        for connection in self.connections.values.sorted(by: { $0.position < $1.position }) {
            remaining += connection.window.connectionLost().map(\.notification)
            connection.timer?.cancel()
            if case .ready(let channel, _) = connection.state {
                channel.close(promise: nil)
                self.metrics.connections.decrement()
            }
            connection.state = .closed
        }
        self.connections.removeAll()
        remaining += self.queue.map(\.notification)
        self.queue.removeAll()
        for key in self.delayed.keys.sorted() {
            let entry = self.delayed[key]!
            entry.task.cancel()
            remaining.append(entry.pending.notification)
        }
        self.delayed.removeAll()
        self.emitOutcomes()
        self.waiters.close(TransportError.senderClosed(host: self.configuration.host, port: self.configuration.port))
        self.events.finish()
        return remaining
    }

    /// Takes out of the queue every notification never written for which `predicate` holds, and
    /// returns them in queue order. Those written before (waiting to be sent again after a lost
    /// connection, a refused stream or a retryable answer) stay: APNs may have seen them, or they
    /// sit below later notifications of theirs that were written.
    func withdraw(where predicate: (HTTP2Notification) -> Bool) -> [HTTP2Notification] {
        let withdrawn = self.queue.extract { !$0.written && predicate($0.notification) }.map(\.notification)
        guard !withdrawn.isEmpty else { return [] }
        self.statistics.withdrawn += withdrawn.count
        self.resumeWaiters()
        return withdrawn
    }

    /// Notifications counted against ``HTTP2Sender/Configuration/maximumQueued``: not yet written.
    private var waiting: Int { self.queue.count + self.delayed.count }

    private var isIdle: Bool {
        self.queue.isEmpty && self.delayed.isEmpty && self.connections.values.allSatisfy { $0.window.isEmpty }
    }

    private var mayWrite: Bool {
        guard let deadline = self.writeDeadline else { return true }
        return ContinuousClock.now < deadline
    }

    // MARK: - Connecting

    /// Gives every empty position a connection while there is work, or always when the configuration
    /// keeps connections open.
    func openConnectionsIfNeeded() {
        guard !self.isShutdown, self.configuration.keepsConnectionsOpen || !self.queue.isEmpty || !self.delayed.isEmpty else { return }
        let now = NIODeadline.now()
        let start = self.poolStart ?? now
        self.poolStart = start
        for position in self.positions.indices where self.positions[position] == nil {
            let connection = HTTP2Connection(
                position: position,
                window: HTTP2StreamWindow(
                    localLimit: self.configuration.maximumStreamsPerConnection, serverErrorLimit: self.configuration.serverErrorLimit
                )
            )
            self.positions[position] = connection
            self.connections[ObjectIdentifier(connection)] = connection
            let backoff = self.configuration.reconnectBackoff.delay(attempt: self.positionFailures[position], random: Double.random(in: 0...1))
            let spacing = start + self.configuration.connectionSpacing * Int64(position) - now
            let delay = max(TimeAmount.nanoseconds(Int64(clamping: backoff)), spacing)
            if delay <= .zero {
                self.connect(connection)
            } else {
                let core = NIOLoopBound(self, eventLoop: self.eventLoop)
                let bound = NIOLoopBound(connection, eventLoop: self.eventLoop)
                self.eventLoop.scheduleTask(in: delay) { core.value.connect(bound.value) }
            }
        }
    }

    private func connect(_ connection: HTTP2Connection) {
        guard !self.isShutdown, case .connecting = connection.state else { return }
        let hostname = self.configuration.serverHostname ?? self.configuration.host
        let isIPAddress = (try? SocketAddress(ipAddress: hostname, port: 0)) != nil
        let sslContext = self.sslContext
        let window = self.configuration.connectionWindow
        let authority = self.authority
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        let bound = NIOLoopBound(connection, eventLoop: self.eventLoop)
        ClientBootstrap(group: self.eventLoop)
            .connectTimeout(self.configuration.connectTimeout)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(try NIOSSLClientHandler(context: sslContext, serverHostname: isIPAddress ? nil : hostname))
                    try sync.addHandler(
                        HTTP2ClientConnectionHandler(
                            core: core.value, connection: bound.value, authority: authority, connectionWindow: window,
                            allocator: channel.allocator
                        )
                    )
                }
            }
            .connect(host: self.configuration.host, port: self.configuration.port)
            .whenFailure { error in core.value.connectFailed(bound.value, error: error) }
    }

    private func connectFailed(_ connection: HTTP2Connection, error: any Error) {
        guard case .connecting = connection.state else { return }
        connection.state = .closed
        self.statistics.connectFailures += 1
        self.metrics.connectFailures.increment()
        self.forget(connection)
        self.positionFailures[connection.position] += 1
        let failure = TransportError.connectionFailed(host: self.configuration.host, port: self.configuration.port, underlying: error)
        self.logger.warning("cannot connect to APNs", metadata: ["error": "\(failure)"])
        self.openConnectionsIfNeeded()
    }

    /// Takes `connection` out of its position (if it still fills it) and out of the pool.
    private func forget(_ connection: HTTP2Connection) {
        if self.positions[connection.position] === connection { self.positions[connection.position] = nil }
        self.connections.removeValue(forKey: ObjectIdentifier(connection))
    }

    /// Opens no new streams on `connection` and gives its position a new one; it closes once answered.
    private func retire(_ connection: HTTP2Connection, why: String) {
        connection.window.drain()
        if self.positions[connection.position] === connection {
            self.positions[connection.position] = nil
            self.statistics.connectionsReplaced += 1
            self.logger.info("replacing an APNs connection", metadata: ["why": "\(why)"])
        }
        if connection.window.isEmpty, case .ready(_, let handler) = connection.state { handler.close() }
        self.openConnectionsIfNeeded()
    }

    // MARK: - Calls from HTTP2ClientConnectionHandler

    func connectionReady(_ connection: HTTP2Connection, channel: any Channel, handler: HTTP2ClientConnectionHandler) {
        guard !self.isShutdown, case .connecting = connection.state else {
            channel.close(promise: nil)
            return
        }
        connection.state = .ready(channel, handler)
        connection.lastActivity = .now()
        connection.readyAt = connection.lastActivity
        self.statistics.connectionsOpened += 1
        self.metrics.connections.increment()
        let tick = TimeAmount.nanoseconds(
            min(max(min(self.configuration.requestTimeout, self.configuration.idlePingInterval).nanoseconds / 4, 10_000_000), 1_000_000_000)
        )
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        let bound = NIOLoopBound(connection, eventLoop: self.eventLoop)
        connection.timer = self.eventLoop.scheduleRepeatedTask(initialDelay: tick, delay: tick) { _ in core.value.tick(bound.value) }
        self.fill(connection)
    }

    func settingsReceived(_ connection: HTTP2Connection, maxConcurrentStreams: Int?) {
        connection.window.settingsReceived(maxConcurrentStreams: maxConcurrentStreams)
    }

    func answered(_ connection: HTTP2Connection, streamID: Int32, status: Int, body: ByteBuffer?) {
        guard let (answered, sentAt) = connection.window.answeredWithSendTime(streamID) else { return }
        var pending = answered
        self.metrics.answerDuration.recordNanoseconds(Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds &- sentAt))
        self.count(status: status)
        connection.madeProgress = true
        self.positionFailures[connection.position] = 0
        if status != 500 { connection.window.answerWasNotServerError() }
        switch HTTP2Verdict.classify(status: status, body: body) {
        case .accepted:
            self.statistics.accepted += 1
            self.outcomes.append(.accepted(tag: pending.notification.tag))
        case .rejected(let rejection):
            self.reject(pending.notification, rejection)
        case .retryTokenLater(let rejection):
            self.statistics.tooManyRequests += 1
            self.retry(&pending, rejection, backoff: self.configuration.tooManyRequestsBackoff)
        case .retry(let rejection):
            if status == 500, connection.window.serverErrorAnswered() {
                self.retire(connection, why: "\(self.configuration.serverErrorLimit) consecutive 500 answers")
            }
            self.retry(&pending, rejection, backoff: self.configuration.retryBackoff)
        case .renewProviderToken(let rejection):
            if let signer = self.signer, let token = connection.token {
                do {
                    try signer.renew(expired: token)
                } catch {
                    self.logger.error("cannot sign a provider token", metadata: ["error": "\(error)"])
                }
            }
            self.retire(connection, why: "ExpiredProviderToken")
            self.retry(&pending, rejection, backoff: nil)
        case .replaceConnection(let rejection):
            self.retire(connection, why: rejection.reason.rawValue)
            self.retry(&pending, rejection, backoff: self.configuration.retryBackoff)
        }
        if connection.window.isFinished, case .ready(_, let handler) = connection.state { handler.close() }
    }

    func streamReset(_ connection: HTTP2Connection, streamID: Int32, refused: Bool) {
        guard let pending = connection.window.answered(streamID) else { return }
        if refused {
            // REFUSED_STREAM (also how a GOAWAY closes the streams above its last id): never processed.
            self.statistics.resentUnprocessed += 1
            self.queue.prepend(pending)
        } else {
            // Reset after it was sent: APNs may have processed it, and said nothing. Like a lost
            // connection, it is sent again and counted as a possible duplicate, never turned into
            // a rejection APNs did not give.
            self.statistics.resentAfterConnectionLoss += 1
            self.queue.prepend(pending)
        }
        if connection.window.isFinished, case .ready(_, let handler) = connection.state { handler.close() }
    }

    func goAwayReceived(_ connection: HTTP2Connection, lastStreamID: Int32, errorCode: String, debugData: ByteBuffer?) {
        self.statistics.goAways += 1
        self.metrics.goAways.increment()
        let reason = HTTP2Rejection.goAwayReason(debugData)
        self.statistics.lastGoAwayReason = reason?.rawValue
        self.logger.info(
            "APNs sent GOAWAY",
            metadata: ["reason": "\(reason?.rawValue ?? "none")", "error_code": "\(errorCode)", "last_stream_id": "\(lastStreamID)"]
        )
        if !connection.madeProgress { self.positionFailures[connection.position] += 1 }
        let unprocessed = connection.window.goAwayReceived(lastStreamID: lastStreamID)
        self.statistics.resentUnprocessed += unprocessed.count
        self.queue.prepend(contentsOf: unprocessed)
        self.retire(connection, why: "GOAWAY \(reason?.rawValue ?? errorCode)")
    }

    func pingAnswered(_ connection: HTTP2Connection) {
        connection.pingSentAt = nil
    }

    func readComplete(_ connection: HTTP2Connection) {
        connection.lastActivity = .now()
        self.emitOutcomes()
        self.fillAll()
        self.resumeWaiters()
    }

    func writable(_ connection: HTTP2Connection) {
        self.fill(connection)
    }

    func connectionClosed(_ connection: HTTP2Connection, error: (any Error)?) {
        connection.timer?.cancel()
        connection.timer = nil
        switch connection.state {
        case .closed:
            return
        case .connecting:
            self.connectFailed(connection, error: error ?? ClosedDuringHandshake())
            return
        case .ready:
            connection.state = .closed
            self.metrics.connections.decrement()
        }
        self.forget(connection)
        guard !self.isShutdown else { return }
        let lost = connection.window.connectionLost()
        if !lost.isEmpty {
            self.statistics.resentAfterConnectionLoss += lost.count
            self.logger.info("APNs connection closed with streams unanswered; sending them again", metadata: ["streams": "\(lost.count)"])
            self.queue.prepend(contentsOf: lost)
        }
        // A connection kept open for work to come that served nothing and was closed after a
        // while (an idle timeout, a GOAWAY) did not fail: reopening it must not wait a backoff
        // that a notification arriving meanwhile would wait too.
        let closedIdle = self.configuration.keepsConnectionsOpen && lost.isEmpty
            && connection.readyAt.map { NIODeadline.now() - $0 >= .seconds(10) } == true
        if !connection.madeProgress && !closedIdle {
            self.positionFailures[connection.position] += 1
            if let error { self.logger.warning("APNs connection failed", metadata: ["error": "\(error)"]) }
        }
        self.openConnectionsIfNeeded()
        self.fillAll()
        self.resumeWaiters()
    }

    // MARK: - Timers

    private func tick(_ connection: HTTP2Connection) {
        guard case .ready(_, let handler) = connection.state else { return }
        let now = NIODeadline.now()
        let timeout = self.configuration.requestTimeout
        if let oldest = connection.window.oldestSentAt, now.uptimeNanoseconds > oldest + UInt64(timeout.nanoseconds) {
            self.statistics.requestTimeouts += 1
            self.metrics.requestTimeouts.increment()
            self.logger.warning(
                "an APNs answer is overdue; giving up the connection",
                metadata: ["timeout_ms": "\(timeout.nanoseconds / 1_000_000)", "in_flight": "\(connection.window.count)"]
            )
            self.giveUp(connection, handler)  // connectionClosed sends its streams again
        } else if let sent = connection.pingSentAt {
            if now - sent > timeout {
                self.statistics.requestTimeouts += 1
                self.metrics.requestTimeouts.increment()
                self.logger.warning("no answer to PING; giving up the connection")
                self.giveUp(connection, handler)
            }
        } else if connection.window.isEmpty, now - connection.lastActivity >= self.configuration.idlePingInterval {
            connection.pingSentAt = now
            connection.lastActivity = now
            self.statistics.pings += 1
            handler.ping()
        }
    }

    /// Closes a connection found unresponsive; its timer stops at once, so it is counted once.
    private func giveUp(_ connection: HTTP2Connection, _ handler: HTTP2ClientConnectionHandler) {
        connection.timer?.cancel()
        connection.timer = nil
        connection.window.drain()
        handler.close()
    }

    // MARK: - Writing

    private func scheduleFill() {
        guard !self.fillScheduled else { return }
        self.fillScheduled = true
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        self.eventLoop.execute {
            core.value.fillScheduled = false
            core.value.fillAll()
        }
    }

    /// Opens streams on every ready connection, sharing the queue between them.
    private func fillAll() {
        guard !self.queue.isEmpty else { return }
        var ready = 0
        for position in self.positions { if let connection = position, connection.isReady, connection.window.room > 0 { ready += 1 } }
        for position in self.positions {
            guard ready > 0, !self.queue.isEmpty else { break }
            guard let connection = position, connection.isReady, connection.window.room > 0 else { continue }
            self.fill(connection, share: (self.queue.count + ready - 1) / ready)
            ready -= 1
        }
    }

    /// Opens up to `share` streams on `connection` (as many as it allows), then flushes once.
    private func fill(_ connection: HTTP2Connection, share: Int = .max) {
        guard case .ready(let channel, let handler) = connection.state, channel.isWritable, self.mayWrite else { return }
        let count = min(connection.window.room, self.queue.count, share)
        guard count > 0 else { return }
        if let signer = self.signer {
            do {
                connection.token = try signer.current()
            } catch {
                self.logger.error("cannot sign a provider token", metadata: ["error": "\(error)"])
                return
            }
        }
        let authorization = connection.token?.compact
        let sentAt = NIODeadline.now().uptimeNanoseconds
        var written = 0
        // Until a request's body waits for send window (flow control), then no further.
        while written < count, handler.acceptsRequests {
            var pending = self.queue.removeFirst()
            pending.written = true
            let streamID = connection.window.open(pending, sentAt: sentAt)!
            handler.writeRequest(streamID: streamID, notification: pending.notification, authorization: authorization)
            written += 1
        }
        guard written > 0 else { return }
        self.statistics.requestsWritten += written
        connection.lastActivity = .now()
        handler.flush()
        self.resumeWaiters()
    }

    // MARK: - Outcomes

    private func reject(_ notification: HTTP2Notification, _ rejection: HTTP2Rejection) {
        self.statistics.rejected += 1
        self.outcomes.append(rejection.outcome(token: notification.token, tag: notification.tag))
        // Answers read from a connection go out at its read's end; a rejection reached otherwise
        // (attempts used up after a timeout or a lost connection) goes out once this loop turn ends.
        if !self.emitScheduled {
            self.emitScheduled = true
            let core = NIOLoopBound(self, eventLoop: self.eventLoop)
            self.eventLoop.execute {
                core.value.emitScheduled = false
                core.value.emitOutcomes()
            }
        }
    }

    /// Sends `pending` again after `backoff`'s delay for its failure count, or rejects it with
    /// `rejection` when that count reaches the maximum.
    private func retry(_ pending: inout Pending, _ rejection: HTTP2Rejection, backoff: Backoff?) {
        pending.failures += 1
        guard pending.failures < self.configuration.maximumAttempts else {
            self.reject(pending.notification, rejection)
            return
        }
        self.statistics.retries += 1
        let delay = backoff?.delay(attempt: pending.failures, random: Double.random(in: 0...1)) ?? 0
        guard delay > 0 else {
            self.queue.prepend(pending)
            return
        }
        let id = self.nextDelayedID
        self.nextDelayedID += 1
        let core = NIOLoopBound(self, eventLoop: self.eventLoop)
        let task = self.eventLoop.scheduleTask(in: .nanoseconds(Int64(clamping: delay))) { core.value.retryDue(id) }
        self.delayed[id] = (pending, task)
    }

    private func retryDue(_ id: Int) {
        guard let entry = self.delayed.removeValue(forKey: id) else { return }
        self.queue.prepend(entry.pending)
        self.openConnectionsIfNeeded()
        self.fillAll()
    }

    private func count(status: Int) {
        if status == 200 {
            self.metrics.accepted.increment()
        } else if let counter = self.answerCounters[status] {
            counter.increment()
        } else {
            let counter = self.metrics.answers(status: status)
            self.answerCounters[status] = counter
            counter.increment()
        }
    }

    private func emitOutcomes() {
        guard !self.outcomes.isEmpty else { return }
        self.events.yield(self.outcomes)
        self.outcomes.removeAll(keepingCapacity: true)
    }

    private func resumeWaiters() {
        // A flush returns with every outcome handed over.
        if self.waiters.awaitsFlush && self.isIdle { self.emitOutcomes() }
        self.waiters.resume(waiting: self.waiting, idle: self.isIdle)
    }
}
