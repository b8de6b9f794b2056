/// How many frames a binary-protocol connection should have on hand per proof round, from what
/// its last rounds took. Performs no I/O and reads no clock: the sender tells it the times.
///
/// A proof round writes its frames, then writes nothing while it waits for the sentinel's
/// rejection (the gateway's error delay, APNs: 0.1–1 s) and for a new connection. A connection
/// therefore delivers `frames / (frames / rate + pause)` per second: with too few frames per round
/// it spends its time waiting. The pacer asks for enough frames that writing takes
/// ``writingShare`` times as long as the pause (80% of the round spent writing), and never more
/// than ``bound``, the most frames the operator lets one connection hold unconfirmed (a crash or
/// a silent drop re-sends at most that many).
///
/// The worker reads ``framesWanted`` to decide how many shards a connection works at once: the
/// round can only be as large as the tokens it has been given.
public struct BinaryRoundPacer: Sendable {
    /// Writing time per unit of pause that the pacer aims for.
    public static let writingShare = 4.0

    /// The most frames a connection may hold unconfirmed.
    public let bound: Int
    /// The fewest frames asked for (one batch).
    public let minimum: Int
    /// Frames the connection should have on hand for its next round: between ``minimum`` and
    /// ``bound``; ``minimum`` until a round has been measured.
    public private(set) var framesWanted: Int

    /// Frames per second while writing, as the last round measured them.
    public private(set) var writeRate: Double?
    /// Nanoseconds from a sentinel to the next connection's readiness, as last measured.
    public private(set) var pauseNanoseconds: UInt64?

    public init(bound: Int, minimum: Int) {
        self.bound = max(1, bound)
        self.minimum = min(max(1, minimum), self.bound)
        self.framesWanted = self.minimum
    }

    /// A round wrote `frames` frames over `nanoseconds`, from its first frame to its sentinel
    /// (the wait for more tokens included: a connection short of tokens measures that shortage).
    public mutating func roundWritten(frames: Int, nanoseconds: UInt64) {
        guard frames > 0 else { return }
        // At least a millisecond: a round written in one batch would otherwise measure no time.
        let seconds = Double(max(nanoseconds, 1_000_000)) / 1e9
        self.writeRate = Double(frames) / seconds
        self.recompute()
    }

    /// The connection could write again `nanoseconds` after its last sentinel: the gateway's
    /// error delay, the close and a new handshake.
    public mutating func resumed(afterPauseOf nanoseconds: UInt64) {
        self.pauseNanoseconds = nanoseconds
        self.recompute()
    }

    private mutating func recompute() {
        guard let rate = self.writeRate, let pause = self.pauseNanoseconds else { return }
        let wanted = rate * Double(pause) / 1e9 * Self.writingShare
        self.framesWanted = wanted >= Double(self.bound) ? self.bound : max(self.minimum, Int(wanted.rounded(.up)))
    }
}
