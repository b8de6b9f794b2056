/// Decides when a receiver returns HTTP/2 flow-control credit for one connection or one stream.
///
/// A peer may send at most the receiver's window of DATA bytes (payload plus padding) before it
/// must wait for `WINDOW_UPDATE`. A receiver that never returns credit stalls the peer once that
/// many bytes have arrived: with APNs' rejection bodies (about 30 bytes each) the default 65,535-byte
/// connection window is spent after some two thousand rejections, and every answer after that waits.
///
/// This value keeps the window at ``target``: ``initialIncrement`` raises a fresh window from the
/// protocol's 65,535 bytes to the target, and ``received(_:)`` returns the bytes read since the last
/// update once they reach half the target, so one `WINDOW_UPDATE` covers many frames.
public struct HTTP2InboundWindow: Sendable, Hashable {
    /// The window every HTTP/2 connection and stream starts with (RFC 9113 §6.9.2), in bytes.
    public static let protocolDefault = 65_535

    /// The window kept open, in bytes.
    public let target: Int
    /// Bytes read and not yet returned.
    public private(set) var unreturned = 0

    /// - Parameter target: the window to keep open, in bytes, from 1 to 2³¹ − 1.
    public init(target: Int) {
        precondition(target >= 1 && target <= Int(Int32.max), "an HTTP/2 window is 1 to 2^31-1 bytes")
        self.target = target
    }

    /// The `WINDOW_UPDATE` increment that raises a fresh window (65,535 bytes) to ``target``, or nil
    /// when the target is not larger.
    public var initialIncrement: Int? {
        self.target > Self.protocolDefault ? self.target - Self.protocolDefault : nil
    }

    /// Records `bytes` of flow-controlled data read (a DATA frame's payload plus its padding, with
    /// the pad-length octet). Returns the increment to send now, or nil while less than half of the
    /// target is owed.
    public mutating func received(_ bytes: Int) -> Int? {
        self.unreturned += bytes
        guard self.unreturned > 0, self.unreturned >= (self.target + 1) / 2 else { return nil }
        defer { self.unreturned = 0 }
        return self.unreturned
    }

    /// The flow-controlled length of a DATA frame: its payload, plus its padding and the pad-length
    /// octet when padded.
    public static func flowControlledLength(payload: Int, paddingBytes: Int?) -> Int {
        payload + (paddingBytes.map { $0 + 1 } ?? 0)
    }
}
