public import NIOCore
public import PushFleetCore

/// Writes notifications in the binary provider protocol's three formats. All integers big-endian.
///
/// The encoder does not judge the token size or payload size: a sender that wants the gateway's
/// verdict (or a test of the simulator) can write whatever it likes. ``BinaryNotification`` values
/// built from validated input are always well-formed.
public struct BinaryFrameEncoder: Sendable {
    public init() {}

    /// The size of a command-2 frame with these parts, in bytes, header included.
    public static func frameSize(tokenByteCount: Int, payloadByteCount: Int) -> Int {
        // cmd(1) + frame length(4) + five item headers(5 × 3) + token + payload + id(4) + expiry(4) + priority(1)
        5 + 15 + tokenByteCount + payloadByteCount + 9
    }

    /// Command 2, items 3 (identifier), 1 (token), 2 (payload), 4 (expiration), 5 (priority). The
    /// identifier first, as Pushy wrote it: a gateway that stops reading a frame at a bad item
    /// (the sentinel's empty token, an invalid one) has read the identifier its error response
    /// must name, or every frame of the round would have an unknown fate.
    @inlinable
    public func writeCommand2(identifier: UInt32, notification: BinaryNotification, into buffer: inout ByteBuffer) {
        let tokenCount = notification.token.count
        let payloadCount = notification.payload.byteCount
        buffer.writeMultipleIntegers(UInt8(2), UInt32(15 + tokenCount + payloadCount + 9), UInt8(3), UInt16(4), identifier)
        buffer.writeMultipleIntegers(UInt8(1), UInt16(truncatingIfNeeded: tokenCount))
        notification.token.withUnsafeBytes { _ = buffer.writeBytes($0) }
        buffer.writeMultipleIntegers(UInt8(2), UInt16(truncatingIfNeeded: payloadCount))
        buffer.writeBytes(notification.payload.bytes)
        buffer.writeMultipleIntegers(
            UInt8(4), UInt16(4), notification.expiration,
            UInt8(5), UInt16(1), notification.priority
        )
    }

    /// A command-2 frame the gateway must reject: a zero-length token, answered with status 2
    /// (*MissingDeviceToken*) naming `identifier`. Its error response proves that every frame
    /// written before it on the connection was processed.
    public func writeSentinel(identifier: UInt32, into buffer: inout ByteBuffer) {
        // Items: identifier, token (0 bytes), payload `{}` (2 bytes), expiration 0, priority 10.
        buffer.writeMultipleIntegers(UInt8(2), UInt32(15 + 0 + 2 + 9), UInt8(3), UInt16(4), identifier)
        buffer.writeMultipleIntegers(UInt8(1), UInt16(0))
        buffer.writeMultipleIntegers(UInt8(2), UInt16(2), UInt8(ascii: "{"), UInt8(ascii: "}"))
        buffer.writeMultipleIntegers(
            UInt8(4), UInt16(4), UInt32(0),
            UInt8(5), UInt16(1), UInt8(10)
        )
    }

    /// Command 1, the "enhanced" format: identifier and expiry, then token and payload.
    public func writeCommand1(identifier: UInt32, expiry: UInt32, token: DeviceToken, payload: [UInt8], into buffer: inout ByteBuffer) {
        buffer.writeMultipleIntegers(UInt8(1), identifier, expiry, UInt16(truncatingIfNeeded: token.count))
        token.withUnsafeBytes { _ = buffer.writeBytes($0) }
        buffer.writeInteger(UInt16(truncatingIfNeeded: payload.count))
        buffer.writeBytes(payload)
    }

    /// Command 0, the "simple" format: no identifier, so an error cannot be attributed.
    public func writeCommand0(token: DeviceToken, payload: [UInt8], into buffer: inout ByteBuffer) {
        buffer.writeMultipleIntegers(UInt8(0), UInt16(truncatingIfNeeded: token.count))
        token.withUnsafeBytes { _ = buffer.writeBytes($0) }
        buffer.writeInteger(UInt16(truncatingIfNeeded: payload.count))
        buffer.writeBytes(payload)
    }
}
