/// The decisions of a binary-protocol sender's connection: when to connect and after what backoff,
/// how many frames a round may hold before its sentinel, and how each way a connection ends
/// counts. Performs no I/O and reads no clock: the sender passes the times (monotonic nanoseconds)
/// and the random numbers behind the backoff's jitter, and keeps the frames (``BinarySendWindow``).
///
/// One connection at a time, each known by its generation, so that a late report about an older
/// one changes nothing: idle → connecting (after a backoff once connections failed) → writing
/// (until the round is full, or the queue stays empty for the linger time) → awaiting proof (the
/// sentinel is out; nothing more is written) → closing (an error response settled the window) →
/// idle. A close without an error response, or before the handshake, is a failed attempt.
public struct BinaryConnectionCycle: Sendable {
    public enum State: Sendable, Equatable {
        case idle
        /// Waiting out a backoff delay, or for TCP connect and the TLS handshake.
        case connecting(generation: Int)
        case writing(generation: Int)
        /// The sentinel is out: nothing more is written; the gateway's answer settles the window.
        case awaitingProof(generation: Int)
        /// An error response arrived: waiting for the close.
        case closing(generation: Int)
        case shutdown
    }

    /// How a connection's close counted.
    public enum Close: Sendable, Equatable {
        /// About an older connection, or after shutdown: nothing to do.
        case ignored
        /// It closed before the handshake completed: a failed attempt.
        case failedToConnect
        /// It closed while writing or awaiting proof; its unconfirmed frames (if any) are unknown
        /// and go out again, and a close with frames unconfirmed is a failed attempt.
        case lost
        /// It closed after its error response, which already settled the window.
        case afterErrorResponse
    }

    /// Delays between connections that ended before proving progress.
    public let backoff: Backoff
    /// Most frames in one round.
    public let confirmEvery: Int
    /// The fewest frames a rejection leaves a round (a round of unknown fate goes below it).
    public let batchSize: Int

    public private(set) var state = State.idle
    private var generation = 0
    /// Consecutive connections that ended before proving any progress.
    public private(set) var failedAttempts = 0
    /// Frames to write before the next proof: halved after a rejection (not below one batch, nor
    /// above what it was), an eighth after a round whose fate stayed unknown (down to one frame),
    /// doubled after a clean proof, up to `confirmEvery`. Everything written after a bad frame is
    /// lost work, so when bad tokens are frequent the sender asks for proof sooner; and a frame
    /// that makes the gateway drop its connection every time is soon in a small round, while the
    /// rounds without it are proven.
    public private(set) var roundLimit: Int
    /// Measures rounds and pauses: how many frames a connection should have on hand.
    public private(set) var pacer: BinaryRoundPacer
    /// When the current round wrote its first frame; `nil` while no round is under way.
    private var roundStarted: UInt64?
    /// When the last sentinel was written, until the next connection is ready.
    private var sentinelWritten: UInt64?

    public init(backoff: Backoff, confirmEvery: Int, batchSize: Int) {
        self.backoff = backoff
        self.confirmEvery = max(1, confirmEvery)
        self.batchSize = max(1, batchSize)
        self.roundLimit = self.confirmEvery
        self.pacer = BinaryRoundPacer(bound: self.confirmEvery, minimum: self.batchSize)
    }

    /// The generation of the connection frames may be written to now, if any.
    public var writingGeneration: Int? {
        if case .writing(let generation) = self.state { return generation }
        return nil
    }

    // MARK: - Inputs

    /// Starts a connection if none is under way and there is work: connect the connection of
    /// `generation` after `delay` nanoseconds (0: at once).
    public mutating func connectIfNeeded(hasWork: Bool, using generator: inout some RandomNumberGenerator) -> (generation: Int, delay: UInt64)? {
        guard case .idle = self.state, hasWork else { return nil }
        self.generation += 1
        self.state = .connecting(generation: self.generation)
        let delay = self.backoff.delay(attempt: self.failedAttempts, random: Double.random(in: 0...1, using: &generator))
        return (self.generation, delay)
    }

    /// The connect of `generation` failed (TCP, or no TLS context): the next one backs off.
    /// False for an older connection.
    public mutating func connectFailed(generation: Int) -> Bool {
        guard case .connecting(let current) = self.state, current == generation else { return false }
        self.failedAttempts += 1
        self.state = .idle
        return true
    }

    /// The handshake of `generation` completed. False when it is not the connection awaited:
    /// close it.
    public mutating func ready(generation: Int, now: UInt64) -> Bool {
        guard case .connecting(let current) = self.state, current == generation else { return false }
        self.state = .writing(generation: generation)
        if let sentinel = self.sentinelWritten {
            self.sentinelWritten = nil
            self.pacer.resumed(afterPauseOf: now >= sentinel ? now - sentinel : 0)
        }
        return true
    }

    /// Frames that may go into the round now, with `unconfirmed` frames already in it.
    public func room(unconfirmed: Int) -> Int {
        max(0, self.roundLimit - unconfirmed)
    }

    /// Frames were written into a round that was empty: the round starts now.
    public mutating func roundStarted(now: UInt64) {
        self.roundStarted = now
    }

    /// Whether a round of `unconfirmed` frames is full and asks for its sentinel.
    public func roundIsFull(unconfirmed: Int) -> Bool {
        unconfirmed >= self.roundLimit
    }

    /// The sentinel goes out after `frames` frames: nothing more is written on this connection.
    /// Returns the generation to await proof from, or `nil` when not writing.
    public mutating func sentinelWritten(frames: Int, now: UInt64) -> Int? {
        guard case .writing(let generation) = self.state else { return nil }
        if let started = self.roundStarted {
            self.pacer.roundWritten(frames: frames, nanoseconds: now >= started ? now - started : 0)
        }
        self.sentinelWritten = now
        self.state = .awaitingProof(generation: generation)
        return generation
    }

    /// Whether the connection of `generation` is writing or awaiting proof: its frames are
    /// unconfirmed, and its error response or its close settles them.
    public func holdsUnconfirmedFrames(generation: Int) -> Bool {
        self.state == .writing(generation: generation) || self.state == .awaitingProof(generation: generation)
    }

    /// Whether an error response on `generation` is to be settled (``holdsUnconfirmedFrames(generation:)``);
    /// the connection then closes.
    public mutating func errorResponseArrived(generation: Int) -> Bool {
        guard self.holdsUnconfirmedFrames(generation: generation) else { return false }
        self.state = .closing(generation: generation)
        return true
    }

    /// How the error response settled the window: whether its identifier named a frame of the
    /// window, whether it rejected a notification (not the sentinel), and how many frames it left
    /// unproven. A rejection halves the next round, a clean proof doubles it, and a matched
    /// identifier proves the connection worked.
    /// An identifier that names no frame leaves the round's fate unknown, as a silent close does:
    /// a failed attempt, and a smaller round.
    public mutating func settled(identifierMatched: Bool, rejectedNotification: Bool, resent: Int) {
        guard identifierMatched else {
            self.unknownRound()
            return
        }
        if rejectedNotification {
            self.roundLimit = min(self.roundLimit, max(self.batchSize, self.roundLimit / 2))
        } else if resent == 0 {
            self.roundLimit = min(self.confirmEvery, self.roundLimit * 2)
        }
        self.failedAttempts = 0
    }

    private mutating func unknownRound() {
        self.failedAttempts += 1
        self.roundLimit = max(1, self.roundLimit / 8)
    }

    /// Whether the proof awaited from `generation` is overdue: close the connection.
    public func proofOverdue(generation: Int) -> Bool {
        self.state == .awaitingProof(generation: generation)
    }

    /// The connection of `generation` closed, `unconfirmed` frames still unsettled in its window.
    public mutating func closed(generation: Int, unconfirmed: Int) -> Close {
        let close: Close
        switch self.state {
        case .connecting(generation):
            self.failedAttempts += 1
            close = .failedToConnect
        case .writing(generation), .awaitingProof(generation):
            if unconfirmed > 0 { self.unknownRound() }
            close = .lost
        case .closing(generation):
            close = .afterErrorResponse
        default:
            return .ignored
        }
        self.state = .idle
        return close
    }

    /// The sender closes: nothing connects or is written from now on.
    public mutating func shutdown() {
        self.state = .shutdown
    }
}
