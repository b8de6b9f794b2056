public import DequeModule

/// The streams of one HTTP/2 connection to APNs: how many may be open, which are in flight, and
/// what becomes of them when the connection ends. Performs no I/O and reads no clock.
///
/// - The limit is the peer's `SETTINGS_MAX_CONCURRENT_STREAMS`, assumed to be 1 until its first
///   SETTINGS frame (APNs allows one stream until a request carries a valid provider token) and
///   capped by ``localLimit``. A later SETTINGS frame changes it either way; streams already open
///   above a lowered limit finish, and no new one opens until the count is below it.
/// - Stream ids are odd and increase; they are allocated here, so the window knows every stream's
///   place and finds one by id in constant time.
/// - `GOAWAY(lastStreamID)`: streams above `lastStreamID` were not processed and are handed back
///   to be sent elsewhere (not re-sends); those at or below it finish normally; nothing new opens.
/// - Connection lost: every stream in flight is handed back; APNs may have delivered them.
/// - After ``serverErrorLimit`` consecutive 500s the connection is to be replaced: APNs has been
///   seen answering every request on a connection with 500 until it reconnects.
public struct HTTP2StreamWindow<Element> {
    @usableFromInline
    struct Slot {
        @usableFromInline var element: Element
        @usableFromInline var sentAt: UInt64

        @inlinable
        init(element: Element, sentAt: UInt64) {
            self.element = element
            self.sentAt = sentAt
        }
    }

    /// Slot `i` holds stream `firstStreamID + 2 i`; `nil` once answered.
    @usableFromInline var slots: Deque<Slot?> = []
    @usableFromInline var firstStreamID: Int32 = 1
    @usableFromInline var nextStreamID: Int32 = 1
    @usableFromInline var inFlight = 0
    /// Streams in flight.
    public var count: Int { self.inFlight }
    /// The peer's limit, before ``localLimit`` applies.
    public private(set) var peerLimit = 1
    /// The most streams this side opens at once, whatever the peer allows. Defaults to 1000.
    public let localLimit: Int
    /// Consecutive 500 answers that make the connection one to replace. Defaults to 3.
    public let serverErrorLimit: Int
    /// The last stream id this connection may use (2^31 - 1 by the protocol).
    public let streamIDLimit: Int32
    private var sawSettings = false
    private var consecutiveServerErrors = 0
    /// No new stream opens: GOAWAY received, the connection is being replaced, or ids ran out.
    public private(set) var isDraining = false
    /// The last stream id allowed has been used: the connection must be replaced (a connection
    /// kept for days at APNs' pace gets there; ids never wrap).
    public private(set) var streamIDsRanOut = false
    /// The `lastStreamID` of the GOAWAY received, if one was.
    public private(set) var goAwayLastStreamID: Int32?

    /// - Parameter firstStreamID: the id of the first stream, 1 as the protocol has it; tests start
    ///   near ``streamIDLimit``.
    public init(localLimit: Int = 1000, serverErrorLimit: Int = 3, streamIDLimit: Int32 = .max, firstStreamID: Int32 = 1) {
        self.localLimit = max(1, localLimit)
        self.serverErrorLimit = max(1, serverErrorLimit)
        self.streamIDLimit = streamIDLimit
        self.firstStreamID = firstStreamID
        self.nextStreamID = firstStreamID
    }

    /// The number of streams allowed at once now.
    public var limit: Int { min(self.peerLimit, self.localLimit) }

    /// How many more streams may open now.
    public var room: Int {
        guard !self.isDraining else { return 0 }
        let ids = Int((Int64(self.streamIDLimit) - Int64(self.nextStreamID)) / 2 + 1)
        return max(0, min(self.limit - self.count, ids))
    }

    public var isEmpty: Bool { self.count == 0 }

    /// Draining and nothing in flight: the connection can be closed.
    public var isFinished: Bool { self.isDraining && self.count == 0 }

    /// When the oldest stream in flight was opened, as the caller passed it.
    public var oldestSentAt: UInt64? { self.slots.first.flatMap { $0?.sentAt } }

    /// The peer's SETTINGS frame. `maxConcurrentStreams` is `nil` when the frame does not carry
    /// the setting: the first frame then means "no limit" (``localLimit`` applies), a later one
    /// leaves the limit as it was.
    public mutating func settingsReceived(maxConcurrentStreams: Int?) {
        if let maxConcurrentStreams {
            self.peerLimit = max(0, maxConcurrentStreams)
        } else if !self.sawSettings {
            self.peerLimit = self.localLimit
        }
        self.sawSettings = true
    }

    /// Opens a stream for `element` and returns its id, or `nil` if ``room`` is 0. After the last
    /// id allowed, ``streamIDsRanOut`` and the window drains.
    @inlinable
    public mutating func open(_ element: Element, sentAt: UInt64) -> Int32? {
        guard self.room > 0 else { return nil }
        let streamID = self.nextStreamID
        if self.slots.isEmpty { self.firstStreamID = streamID }
        self.slots.append(Slot(element: element, sentAt: sentAt))
        self.inFlight += 1
        if streamID > self.streamIDLimit - 2 {
            self.idsRanOut()
        } else {
            self.nextStreamID = streamID + 2
        }
        return streamID
    }

    @usableFromInline
    mutating func idsRanOut() {
        self.streamIDsRanOut = true
        self.isDraining = true
    }

    /// The answer to `streamID` is complete: returns its element, or `nil` for a stream not in flight.
    @inlinable
    public mutating func answered(_ streamID: Int32) -> Element? {
        self.answeredWithSendTime(streamID)?.element
    }

    /// ``answered(_:)``, with the `sentAt` its stream was opened with.
    @inlinable
    public mutating func answeredWithSendTime(_ streamID: Int32) -> (element: Element, sentAt: UInt64)? {
        guard streamID >= self.firstStreamID, streamID & 1 == 1 else { return nil }
        let index = Int((streamID - self.firstStreamID) / 2)
        guard index < self.slots.count, let slot = self.slots[index] else { return nil }
        self.slots[index] = nil
        self.inFlight -= 1
        while let first = self.slots.first, first == nil {
            self.slots.removeFirst()
            self.firstStreamID &+= 2
        }
        return (slot.element, slot.sentAt)
    }

    /// The peer sent GOAWAY: returns, in stream order, the streams above `lastStreamID`; they were
    /// never processed. Nothing new opens; the rest finish.
    public mutating func goAwayReceived(lastStreamID: Int32) -> [Element] {
        self.isDraining = true
        self.goAwayLastStreamID = min(lastStreamID, self.goAwayLastStreamID ?? .max)
        var unprocessed: [Element] = []
        while !self.slots.isEmpty, self.firstStreamID + 2 * Int32(self.slots.count - 1) > lastStreamID {
            if let slot = self.slots.removeLast() {
                unprocessed.append(slot.element)
                self.inFlight -= 1
            }
        }
        return unprocessed.reversed()
    }

    /// Stops opening streams (the connection is to be replaced); those in flight finish.
    public mutating func drain() {
        self.isDraining = true
    }

    /// The connection ended: returns, in stream order, every stream still in flight. APNs may
    /// have processed them.
    public mutating func connectionLost() -> [Element] {
        self.isDraining = true
        let lost = self.slots.compactMap { $0?.element }
        self.slots.removeAll()
        self.inFlight = 0
        return lost
    }

    /// A 500 answer. Returns `true` (and drains) when it makes ``serverErrorLimit`` in a row.
    public mutating func serverErrorAnswered() -> Bool {
        self.consecutiveServerErrors += 1
        guard self.consecutiveServerErrors >= self.serverErrorLimit else { return false }
        self.isDraining = true
        return true
    }

    /// Any answer but a 500 ends a run of them.
    public mutating func answerWasNotServerError() {
        self.consecutiveServerErrors = 0
    }
}
