/// The decisions of an HTTP/2 sender's pool of connections: when each position opens a connection,
/// how long it waits after failures, which connection gives up its position, and when a quiet
/// connection is pinged or given up. Performs no I/O and reads no clock: the sender passes the
/// times (monotonic nanoseconds) and the random numbers behind the backoff's jitter.
///
/// A connection's life as the pool sees it: opened into an empty position (the positions
/// ``Configuration/spacing`` apart at first, then after a backoff if the position's last
/// connections failed) → ready → retired (GOAWAY, an expired provider token, repeated 500s: its
/// position is free for a replacement while it finishes its streams) → closed. A connection that
/// closes before any answer counts as a failed attempt of its position; one answer resets the count.
///
/// Each connection's own facts live in a ``Member``, which the sender keeps beside the connection
/// and passes back with every input about it, as it keeps an ``HTTP2StreamWindow``.
public struct HTTP2ConnectionPool: Sendable {
    public struct Configuration: Sendable {
        /// Connections the pool keeps.
        public var positions: Int
        /// Nanoseconds between the first connections of two neighbouring positions.
        public var spacing: UInt64
        /// Delays before a position's next connection after failed ones.
        public var reconnectBackoff: Backoff
        /// Whether positions are filled with no work waiting.
        public var keepsConnectionsOpen: Bool
        /// Nanoseconds an answer (or a PING's acknowledgement) may take.
        public var requestTimeout: UInt64
        /// Nanoseconds without traffic after which a connection with nothing in flight is pinged.
        public var idlePingInterval: UInt64
        /// A kept-open connection that served nothing and closed at least this long after it was
        /// ready (an idle timeout, a GOAWAY) did not fail: its replacement waits no backoff.
        public var idleCloseGrace: UInt64

        public init(
            positions: Int, spacing: UInt64, reconnectBackoff: Backoff, keepsConnectionsOpen: Bool, requestTimeout: UInt64,
            idlePingInterval: UInt64, idleCloseGrace: UInt64 = 10_000_000_000
        ) {
            self.positions = max(1, positions)
            self.spacing = spacing
            self.reconnectBackoff = reconnectBackoff
            self.keepsConnectionsOpen = keepsConnectionsOpen
            self.requestTimeout = requestTimeout
            self.idlePingInterval = idlePingInterval
            self.idleCloseGrace = idleCloseGrace
        }
    }

    /// One connection of the pool.
    public struct Member: Sendable {
        public enum Phase: Sendable, Equatable {
            /// Waiting out a spacing or backoff delay, or for TCP connect and the TLS handshake.
            case connecting
            case ready
            case closed
        }

        /// Unique within the pool.
        public let id: Int
        /// The position it was opened for (which it fills until retired or closed).
        public let position: Int
        public fileprivate(set) var phase = Phase.connecting
        /// Some answer arrived on it: a later failure is not a failed attempt.
        public fileprivate(set) var madeProgress = false
        fileprivate var readyAt: UInt64?
        fileprivate var lastActivity: UInt64 = 0
        fileprivate var pingSentAt: UInt64?

        fileprivate init(id: Int, position: Int) {
            self.id = id
            self.position = position
        }
    }

    /// A connection to open after `delay` nanoseconds (0: at once).
    public struct Opening: Sendable {
        public var member: Member
        public var delay: UInt64
    }

    /// How a connection's close counted.
    public enum Close: Sendable, Equatable {
        /// Already closed: nothing to do.
        case ignored
        /// It closed before it was ready: a failed connect.
        case failedToConnect
        /// It closed while ready; `failed` when it made no progress (its position backs off).
        case closed(failed: Bool)
    }

    /// What a connection's periodic check asks for.
    public enum Check: Sendable, Equatable {
        case nothing
        /// Send a PING: nothing in flight and no traffic for ``Configuration/idlePingInterval``.
        case ping
        /// Close it: the oldest stream's answer is overdue.
        case giveUpAnswerOverdue
        /// Close it: the PING went unanswered.
        case giveUpPingUnanswered
    }

    public let configuration: Configuration
    /// The member filling each position (by id), `nil` for an empty position.
    public private(set) var filling: [Int?]
    /// Consecutive failed connections per position: the backoff attempt of its next one.
    public private(set) var failures: [Int]
    /// When the first connection was asked for: position `i` opens no sooner than `i × spacing` after it.
    private var start: UInt64?
    private var nextID = 0
    public private(set) var isShutdown = false

    public init(configuration: Configuration) {
        self.configuration = configuration
        self.filling = Array(repeating: nil, count: configuration.positions)
        self.failures = Array(repeating: 0, count: configuration.positions)
    }

    /// Nanoseconds between two checks of a ready connection: a quarter of the shorter of the
    /// request timeout and the ping interval, between 10 ms and 1 s.
    public var checkInterval: UInt64 {
        min(max(min(self.configuration.requestTimeout, self.configuration.idlePingInterval) / 4, 10_000_000), 1_000_000_000)
    }

    // MARK: - Inputs

    /// Gives every empty position a connection, if there is work (`hasWork`) or the pool keeps its
    /// connections open. Each waits the later of its position's backoff and its spacing.
    public mutating func open(now: UInt64, hasWork: Bool, using generator: inout some RandomNumberGenerator) -> [Opening] {
        guard !self.isShutdown, self.configuration.keepsConnectionsOpen || hasWork else { return [] }
        let start = self.start ?? now
        self.start = start
        var openings: [Opening] = []
        for position in self.filling.indices where self.filling[position] == nil {
            let member = Member(id: self.nextID, position: position)
            self.nextID += 1
            self.filling[position] = member.id
            let backoff = self.configuration.reconnectBackoff.delay(
                attempt: self.failures[position], random: Double.random(in: 0...1, using: &generator)
            )
            let spacingEnds = start &+ self.configuration.spacing &* UInt64(position)
            let spacing = spacingEnds > now ? spacingEnds - now : 0
            openings.append(Opening(member: member, delay: max(backoff, spacing)))
        }
        return openings
    }

    /// The connect (TCP or TLS) failed: the position is free and its next connection backs off.
    /// False when there is nothing to report: the member was not connecting, or the pool is shut down.
    public mutating func connectFailed(_ member: inout Member) -> Bool {
        guard member.phase == .connecting else { return false }
        member.phase = .closed
        self.vacate(member)
        guard !self.isShutdown else { return false }
        self.failures[member.position] += 1
        return true
    }

    /// The handshake completed. False when the connection is not wanted any more (shut down,
    /// already closed): close it.
    public mutating func ready(_ member: inout Member, now: UInt64) -> Bool {
        guard !self.isShutdown, member.phase == .connecting else { return false }
        member.phase = .ready
        member.readyAt = now
        member.lastActivity = now
        return true
    }

    /// An answer arrived: the connection works, and its position's failures are forgotten.
    public mutating func answered(_ member: inout Member) {
        member.madeProgress = true
        self.failures[member.position] = 0
    }

    /// The connection opens no more streams; its position is free for a replacement. True when it
    /// still filled its position (a replacement is due), false when it had already given it up.
    public mutating func retire(_ member: Member) -> Bool {
        guard self.filling[member.position] == member.id else { return false }
        self.filling[member.position] = nil
        return true
    }

    /// A GOAWAY arrived: the connection retires, and counts as a failed attempt if it never made
    /// progress, unless it was kept open and served nothing for ``Configuration/idleCloseGrace``
    /// (APNs' `IdleTimeout`: a lane connection waiting for a ring did not fail). A second GOAWAY (a
    /// graceful shutdown in two steps) counts nothing more. Returns ``retire(_:)``'s answer.
    public mutating func goAway(_ member: Member, now: UInt64) -> Bool {
        guard self.retire(member) else { return false }
        if !member.madeProgress && !self.servedIdle(member, now: now) { self.failures[member.position] += 1 }
        return true
    }

    /// Whether `member` is a kept-open connection that was ready for at least
    /// ``Configuration/idleCloseGrace``: an end then is its idleness, not a failure.
    private func servedIdle(_ member: Member, now: UInt64) -> Bool {
        self.configuration.keepsConnectionsOpen
            && member.readyAt.map { now >= $0 && now - $0 >= self.configuration.idleCloseGrace } == true
    }

    /// The connection closed, with `lostStreams` streams unanswered.
    public mutating func closed(_ member: inout Member, now: UInt64, lostStreams: Int) -> Close {
        switch member.phase {
        case .closed:
            return .ignored
        case .connecting:
            return self.connectFailed(&member) ? .failedToConnect : .ignored
        case .ready:
            member.phase = .closed
            self.vacate(member)
        }
        guard !self.isShutdown else { return .closed(failed: false) }
        guard !member.madeProgress && !(lostStreams == 0 && self.servedIdle(member, now: now)) else { return .closed(failed: false) }
        self.failures[member.position] += 1
        return .closed(failed: true)
    }

    /// Something was read or written on the connection.
    public func activity(_ member: inout Member, now: UInt64) {
        member.lastActivity = now
    }

    /// The PING was acknowledged.
    public func pingAnswered(_ member: inout Member) {
        member.pingSentAt = nil
    }

    /// The periodic check of a ready connection: `inFlight` when streams await answers,
    /// `oldestSentAt` when its oldest unanswered stream was written.
    public func check(_ member: inout Member, now: UInt64, inFlight: Bool, oldestSentAt: UInt64?) -> Check {
        guard member.phase == .ready else { return .nothing }
        let timeout = self.configuration.requestTimeout
        if let oldest = oldestSentAt, now > oldest &+ timeout { return .giveUpAnswerOverdue }
        if let sent = member.pingSentAt { return now > sent &+ timeout ? .giveUpPingUnanswered : .nothing }
        guard !inFlight, now >= member.lastActivity &+ self.configuration.idlePingInterval else { return .nothing }
        member.pingSentAt = now
        member.lastActivity = now
        return .ping
    }

    /// The sender closes: no connection opens or becomes ready from now on.
    public mutating func shutdown() {
        self.isShutdown = true
        for position in self.filling.indices { self.filling[position] = nil }
    }

    private mutating func vacate(_ member: Member) {
        if self.filling[member.position] == member.id { self.filling[member.position] = nil }
    }
}
