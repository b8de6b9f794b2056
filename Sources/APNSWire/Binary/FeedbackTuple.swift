public import NIOCore
public import PushFleetCore

/// One record of the feedback service: `| timestamp (4, epoch s) | token length (2) | token |`.
/// The timestamp is when APNs determined the app no longer exists on the device.
public struct FeedbackTuple: Hashable, Sendable {
    public var timestamp: UInt32
    public var token: DeviceToken

    public init(timestamp: UInt32, token: DeviceToken) {
        self.timestamp = timestamp
        self.token = token
    }

    /// Appends the tuple to `buffer`.
    public func write(into buffer: inout ByteBuffer) {
        buffer.writeMultipleIntegers(self.timestamp, UInt16(truncatingIfNeeded: self.token.count))
        self.token.withUnsafeBytes { _ = buffer.writeBytes($0) }
    }
}

/// Decodes feedback tuples as the feedback service streams them.
public struct FeedbackTupleDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = FeedbackTuple

    public init() {}

    public mutating func decode(buffer: inout ByteBuffer) throws -> FeedbackTuple? {
        guard let (timestamp, length) = buffer.getMultipleIntegers(at: buffer.readerIndex, as: (UInt32, UInt16).self) else { return nil }
        guard buffer.readableBytes >= 6 + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: 6)
        let bytes = buffer.readBytes(length: Int(length))!
        do {
            return FeedbackTuple(timestamp: timestamp, token: try DeviceToken(bytes: bytes))
        } catch {
            throw APNSWireError.invalidFeedbackToken(byteCount: Int(length))
        }
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> FeedbackTuple? {
        if let tuple = try self.decode(buffer: &buffer) { return tuple }
        if seenEOF && buffer.readableBytes > 0 { throw APNSWireError.truncated(byteCount: buffer.readableBytes, what: "feedback tuple") }
        return nil
    }
}
