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
/// A connection's life: opened when ``HTTP2ConnectionPool`` says so → streams opened up to the
/// limit, refilled after every read → retired (GOAWAY, expired provider token, repeated 500s): no
/// new streams, a replacement opened at once, closed when its streams are answered → or lost: its
/// streams go back to the front of the queue. The pool decides; this class does the I/O.
final class HTTP2SenderCore {
    /// A notification and the retryable answers it has had.
    struct Pending {
        var notification: HTTP2Notification
        var failures: Int
        /// Whether it was ever written: only notifications never written may be withdrawn.
        var written = false
        /// ``HTTP2SenderCore/answersRead`` when it first went unanswered (its stream reset, its
        /// connection lost): whether APNs answered anything since tells a request of its own that
        /// never gets an answer from a gateway that answers nothing.
        var answersAtFirstMiss: Int? = nil
    }

    private let configuration: HTTP2Sender.Configuration
    private let eventLoop: any EventLoop
    private let events: AsyncStream<[DeliveryOutcome]>.Continuation
    private let logger: Logger
    private let sslContext: NIOSSLContext
    private let signer: ProviderTokenSigner?
    private let authority: String

    private var queue: Deque<Pending> = []
    /// Answers read, of any status, on any connection.
    private var answersRead = 0
    /// Notifications waiting out a retry delay, by a number of their own.
    private var delayed: [Int: (pending: Pending, task: Scheduled<Void>)] = [:]
    private var nextDelayedID = 0
    /// Which connections open when, which are replaced, which are given up.
    private var pool: HTTP2ConnectionPool
    /// Every connection not yet closed, by member id: the positions' plus retired ones finishing
    /// their streams.
    private var connections: [Int: HTTP2Connection] = [:]
    private var random = SystemRandomNumberGenerator()
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
        self.pool = HTTP2ConnectionPool(
            configuration: HTTP2ConnectionPool.Configuration(
                positions: configuration.connections,
                spacing: UInt64(max(0, configuration.connectionSpacing.nanoseconds)),
                reconnectBackoff: configuration.reconnectBackoff,
                keepsConnectionsOpen: configuration.keepsConnectionsOpen,
                requestTimeout: UInt64(max(0, configuration.requestTimeout.nanoseconds)),
                idlePingInterval: UInt64(max(0, configuration.idlePingInterval.nanoseconds))
            )
        )
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
        self.pool.shutdown()
        var remaining: [HTTP2Notification] = []
        for connection in self.connections.values.sorted(by: { $0.position < $1.position }) {
            remaining += connection.window.connectionLost().map(\.notification)
            connection.timer?.cancel()
            if let (channel, _) = connection.open {
                channel.close(promise: nil)
                self.metrics.connections.decrement()
            }
            connection.open = nil
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
        let openings = self.pool.open(
            now: NIODeadline.now().uptimeNanoseconds, hasWork: !self.queue.isEmpty || !self.delayed.isEmpty, using: &self.random
        )
        for opening in openings {
            let connection = HTTP2Connection(
                member: opening.member,
                window: HTTP2StreamWindow(
                    localLimit: self.configuration.maximumStreamsPerConnection, serverErrorLimit: self.configuration.serverErrorLimit,
                    streamIDLimit: self.configuration.streamIDLimit
                )
            )
            self.connections[opening.member.id] = connection
            if opening.delay == 0 {
                self.connect(connection)
            } else {
                let core = NIOLoopBound(self, eventLoop: self.eventLoop)
                let bound = NIOLoopBound(connection, eventLoop: self.eventLoop)
                self.eventLoop.scheduleTask(in: .nanoseconds(Int64(clamping: opening.delay))) { core.value.connect(bound.value) }
            }
        }
    }

    private func connect(_ connection: HTTP2Connection) {
        guard !self.isShutdown, connection.member.phase == .connecting else { return }
        let hostname = self.configuration.serverHostname ?? self.configuration.host
        let isIPAddress = (try? SocketAddress(ipAddress: hostname, port: 0)) != nil
        let sslContext = self.sslContext
        let window = self.configuration.connectionWindow
        let connectTimeout = self.configuration.connectTimeout
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
                    try sync.addHandler(HandshakeTimeout(timeout: connectTimeout))
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
        guard self.pool.connectFailed(&connection.member) else { return }
        self.connections.removeValue(forKey: connection.member.id)
        self.connectFailureReported(error, position: connection.position)
    }

    private func connectFailureReported(_ error: any Error, position: Int) {
        self.statistics.connectFailures += 1
        self.metrics.connectFailures.increment()
        let failure = TransportError.connectionFailed(host: self.configuration.host, port: self.configuration.port, underlying: error)
        self.logger.warning("cannot connect to APNs", metadata: ["error": "\(failure)"])
        self.connectionFailed(error, connected: false, lost: [], position: position)
        self.openConnectionsIfNeeded()
        self.resumeWaiters()
    }

    /// A connection of `position` failed before any answer came on it (`connected`: after its TLS
    /// handshake), leaving `lost` streams unanswered. The gateway cannot be used when no connection
    /// is ready and either the position has failed ``HTTP2Sender/Configuration/maximumAttempts``
    /// times in a row (its backoff between them: about 1.5 s at the defaults) or a lost
    /// notification used its last attempt with nothing answered since its first miss. Then nothing
    /// waiting can go: the lost streams and the queue are refused with why (``GatewayFailure``),
    /// and so is whatever waits at each further such failure. Otherwise the lost streams go again.
    private func connectionFailed(_ error: (any Error)?, connected: Bool, lost: [Pending], position: Int) {
        let attemptsRanOut = self.pool.failures[position] >= self.configuration.maximumAttempts
            || lost.contains { $0.failures + 1 >= self.configuration.maximumAttempts && ($0.answersAtFirstMiss ?? self.answersRead) == self.answersRead }
        guard attemptsRanOut, !self.connections.values.contains(where: { $0.member.phase == .ready }) else {
            if !lost.isEmpty { self.connectionLost(lost) }
            return
        }
        // Possibly delivered, as in ``connectionLost(_:)``: they go again after the resume.
        self.statistics.resentAfterConnectionLoss += lost.count
        let waiting = lost + self.queue
        self.queue.removeAll()
        guard !waiting.isEmpty else { return }
        let refusal = GatewayFailure.refusal(error, host: self.configuration.host, port: self.configuration.port, connected: connected)
        self.logger.error(
            "APNs connections keep failing; refusing the notifications waiting for one",
            metadata: ["refusal": "\(refusal)", "notifications": "\(waiting.count)", "failed_connections": "\(self.pool.failures[position])"]
        )
        for pending in waiting { self.finish(.refused(tag: pending.notification.tag, token: pending.notification.token, refusal)) }
    }

    /// Opens no new streams on `connection` and gives its position a new one; it closes once answered.
    private func retire(_ connection: HTTP2Connection, why: String) {
        self.retired(connection, replaced: self.pool.retire(connection.member), why: why)
    }

    /// After the pool retired `connection`: drains it, counts its replacement, opens one.
    private func retired(_ connection: HTTP2Connection, replaced: Bool, why: String) {
        connection.window.drain()
        if replaced {
            self.statistics.connectionsReplaced += 1
            self.logger.info("replacing an APNs connection", metadata: ["why": "\(why)"])
        }
        if connection.window.isEmpty, let (_, handler) = connection.open { handler.close() }
        self.openConnectionsIfNeeded()
    }

    // MARK: - Calls from HTTP2ClientConnectionHandler

    func connectionReady(_ connection: HTTP2Connection, channel: any Channel, handler: HTTP2ClientConnectionHandler) {
        guard self.pool.ready(&connection.member, now: NIODeadline.now().uptimeNanoseconds) else {
            channel.close(promise: nil)
            return
        }
        connection.open = (channel, handler)
        self.statistics.connectionsOpened += 1
        self.metrics.connections.increment()
        let tick = TimeAmount.nanoseconds(Int64(self.pool.checkInterval))
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
        self.answersRead &+= 1
        self.metrics.answerDuration.recordNanoseconds(Int64(truncatingIfNeeded: NIODeadline.now().uptimeNanoseconds &- sentAt))
        self.count(status: status)
        self.pool.answered(&connection.member)
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
        if connection.window.isFinished, let (_, handler) = connection.open { handler.close() }
    }

    func streamReset(_ connection: HTTP2Connection, streamID: Int32, refused: Bool) {
        guard var pending = connection.window.answered(streamID) else { return }
        if refused {
            // REFUSED_STREAM (also how a GOAWAY closes the streams above its last id): never processed.
            self.statistics.resentUnprocessed += 1
        } else {
            // Reset after it was sent: APNs may have processed it, and said nothing. Like a lost
            // connection's, it is counted as a possible duplicate: it goes again, here or (if this
            // was its last attempt and it pauses the campaign) after the resume.
            self.statistics.resentAfterConnectionLoss += 1
        }
        // An attempt, as a 503 is: a gateway that resets this request every time must not have it
        // sent again forever.
        if self.missedAnswer(&pending, .streamReset) {
            self.retry(&pending, backoff: self.configuration.retryBackoff)
        }
        if connection.window.isFinished, let (_, handler) = connection.open { handler.close() }
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
        let unprocessed = connection.window.goAwayReceived(lastStreamID: lastStreamID)
        self.statistics.resentUnprocessed += unprocessed.count
        self.queue.prepend(contentsOf: unprocessed)
        self.retired(connection, replaced: self.pool.goAway(connection.member, now: NIODeadline.now().uptimeNanoseconds), why: "GOAWAY \(reason?.rawValue ?? errorCode)")
    }

    func pingAnswered(_ connection: HTTP2Connection) {
        self.pool.pingAnswered(&connection.member)
    }

    func readComplete(_ connection: HTTP2Connection) {
        self.pool.activity(&connection.member, now: NIODeadline.now().uptimeNanoseconds)
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
        let wasOpen = connection.open != nil
        connection.open = nil
        let now = NIODeadline.now().uptimeNanoseconds
        let lost = connection.member.phase == .ready && !self.isShutdown ? connection.window.connectionLost() : []
        let close = self.pool.closed(&connection.member, now: now, lostStreams: lost.count)
        switch close {
        case .ignored:
            return
        case .failedToConnect:
            self.connections.removeValue(forKey: connection.member.id)
            self.connectFailureReported(error ?? ClosedDuringHandshake(), position: connection.position)
            return
        case .closed(let failed):
            if wasOpen { self.metrics.connections.decrement() }
            self.connections.removeValue(forKey: connection.member.id)
            guard !self.isShutdown else { return }
            if failed {
                if let error { self.logger.warning("APNs connection failed", metadata: ["error": "\(error)"]) }
                self.connectionFailed(error, connected: true, lost: lost, position: connection.position)
            } else if !lost.isEmpty {
                self.connectionLost(lost)
            }
        }
        self.openConnectionsIfNeeded()
        self.fillAll()
        self.resumeWaiters()
    }

    // MARK: - Timers

    private func tick(_ connection: HTTP2Connection) {
        guard let (_, handler) = connection.open else { return }
        let check = self.pool.check(
            &connection.member, now: NIODeadline.now().uptimeNanoseconds, inFlight: !connection.window.isEmpty,
            oldestSentAt: connection.window.oldestSentAt
        )
        switch check {
        case .nothing:
            break
        case .ping:
            self.statistics.pings += 1
            handler.ping()
        case .giveUpAnswerOverdue:
            self.statistics.requestTimeouts += 1
            self.metrics.requestTimeouts.increment()
            self.logger.warning(
                "an APNs answer is overdue; giving up the connection",
                metadata: [
                    "timeout_ms": "\(self.configuration.requestTimeout.nanoseconds / 1_000_000)", "in_flight": "\(connection.window.count)",
                ]
            )
            self.giveUp(connection, handler)  // connectionClosed sends its streams again
        case .giveUpPingUnanswered:
            self.statistics.requestTimeouts += 1
            self.metrics.requestTimeouts.increment()
            self.logger.warning("no answer to PING; giving up the connection")
            self.giveUp(connection, handler)
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
        var ready = self.pool.filling.count { self.fillable($0) != nil }
        for id in self.pool.filling {
            guard ready > 0, !self.queue.isEmpty else { break }
            guard let connection = self.fillable(id) else { continue }
            self.fill(connection, share: (self.queue.count + ready - 1) / ready)
            ready -= 1
        }
    }

    /// The connection filling a position, if it is ready and has room for a stream.
    private func fillable(_ id: Int?) -> HTTP2Connection? {
        guard let id, let connection = self.connections[id], connection.open != nil, connection.window.room > 0 else { return nil }
        return connection
    }

    /// Opens up to `share` streams on `connection` (as many as it allows), then flushes once.
    private func fill(_ connection: HTTP2Connection, share: Int = .max) {
        guard let (channel, handler) = connection.open, channel.isWritable, self.mayWrite else { return }
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
        self.pool.activity(&connection.member, now: NIODeadline.now().uptimeNanoseconds)
        handler.flush()
        // Once, with the last id: the window opens nothing more after it.
        if connection.window.streamIDsRanOut { self.retire(connection, why: "its stream ids ran out") }
        self.resumeWaiters()
    }

    // MARK: - Outcomes

    private func reject(_ notification: HTTP2Notification, _ rejection: HTTP2Rejection) {
        self.finish(rejection.outcome(token: notification.token, tag: notification.tag))
    }

    /// A final outcome other than acceptance.
    private func finish(_ outcome: DeliveryOutcome) {
        self.statistics.rejected += 1
        self.outcomes.append(outcome)
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
        self.retry(&pending, backoff: backoff)
    }

    /// Sends `pending` again after `backoff`'s delay for its failure count.
    private func retry(_ pending: inout Pending, backoff: Backoff?) {
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

    /// Sends the streams a closed connection left unanswered again, at once (reconnecting paces
    /// them), each counted as an attempt: a request that makes the gateway drop the connection (or
    /// never answers it) must not go round forever.
    private func connectionLost(_ lost: [Pending]) {
        // Each possibly delivered: counted as a possible duplicate, whether it goes again here or
        // (its attempts used up, the campaign paused) after the resume.
        self.statistics.resentAfterConnectionLoss += lost.count
        var again: [Pending] = []
        again.reserveCapacity(lost.count)
        for var pending in lost where self.missedAnswer(&pending, .connectionLost) {
            again.append(pending)
        }
        self.logger.info(
            "APNs connection closed with streams unanswered; sending them again",
            metadata: ["streams": "\(lost.count)", "attempts_used_up": "\(lost.count - again.count)"]
        )
        self.queue.prepend(contentsOf: again)
    }

    /// Counts an attempt of `pending` that got no answer (`reason`: ``RejectionReason/streamReset``
    /// or ``RejectionReason/connectionLost``). - Returns: true if it has attempts left; otherwise
    /// it has its final outcome (``DeliveryOutcome/unanswered(tag:token:_:othersAnswered:)``).
    private func missedAnswer(_ pending: inout Pending, _ reason: RejectionReason) -> Bool {
        pending.failures += 1
        let since = pending.answersAtFirstMiss ?? self.answersRead
        pending.answersAtFirstMiss = since
        guard pending.failures >= self.configuration.maximumAttempts else { return true }
        self.finish(.unanswered(tag: pending.notification.tag, token: pending.notification.token, reason, othersAnswered: self.answersRead != since))
        return false
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
