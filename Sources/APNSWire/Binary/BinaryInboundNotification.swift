public import NIOCore

/// A notification as a gateway reads it off the wire, before validation.
///
/// Token and payload are slices of the read buffer (no copy). Items a format lacks are `nil`.
public struct BinaryInboundNotification: Hashable, Sendable {
    /// 0, 1 or 2.
    public var command: UInt8
    /// The identifier the error response must echo; 0 for command 0, which has none.
    public var identifier: UInt32
    public var token: ByteBuffer?
    public var payload: ByteBuffer?
    public var expiration: UInt32?
    public var priority: UInt8?

    public init(command: UInt8, identifier: UInt32, token: ByteBuffer?, payload: ByteBuffer?, expiration: UInt32?, priority: UInt8?) {
        self.command = command
        self.identifier = identifier
        self.token = token
        self.payload = payload
        self.expiration = expiration
        self.priority = priority
    }
}

/// What a gateway reads: a notification, or bytes it cannot parse (an unknown command, a frame
/// whose items do not add up). After `.unparseable` the stream cannot be resynchronised.
public enum BinaryInboundMessage: Hashable, Sendable {
    case notification(BinaryInboundNotification)
    case unparseable(identifier: UInt32, reason: String)
}

/// Decodes commands 0, 1 and 2 as the gateway receives them.
public struct BinaryNotificationDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = BinaryInboundMessage

    /// The largest command-2 frame accepted: five items of the largest size a 16-bit length allows.
    public static let maximumFrameLength = 5 * (3 + Int(UInt16.max))

    public init() {}

    public mutating func decode(buffer: inout ByteBuffer) throws -> BinaryInboundMessage? {
        guard let command = buffer.getInteger(at: buffer.readerIndex, as: UInt8.self) else { return nil }
        switch command {
        case 0: return Self.decodeCommand0(&buffer)
        case 1: return Self.decodeCommand1(&buffer)
        case 2: return Self.decodeCommand2(&buffer)
        default:
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            return .unparseable(identifier: 0, reason: "unknown command \(command)")
        }
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> BinaryInboundMessage? {
        try self.decode(buffer: &buffer)
    }

    /// `| 0 | token length (2) | token | payload length (2) | payload |`
    private static func decodeCommand0(_ buffer: inout ByteBuffer) -> BinaryInboundMessage? {
        let start = buffer.readerIndex
        guard let tokenLength = buffer.getInteger(at: start + 1, as: UInt16.self),
            let payloadLength = buffer.getInteger(at: start + 3 + Int(tokenLength), as: UInt16.self),
            buffer.readableBytes >= 5 + Int(tokenLength) + Int(payloadLength)
        else { return nil }
        let token = buffer.getSlice(at: start + 3, length: Int(tokenLength))
        let payload = buffer.getSlice(at: start + 5 + Int(tokenLength), length: Int(payloadLength))
        buffer.moveReaderIndex(forwardBy: 5 + Int(tokenLength) + Int(payloadLength))
        return .notification(.init(command: 0, identifier: 0, token: token, payload: payload, expiration: nil, priority: nil))
    }

    /// `| 1 | identifier (4) | expiry (4) | token length (2) | token | payload length (2) | payload |`
    private static func decodeCommand1(_ buffer: inout ByteBuffer) -> BinaryInboundMessage? {
        let start = buffer.readerIndex
        guard let (identifier, expiry, tokenLength) = buffer.getMultipleIntegers(at: start + 1, as: (UInt32, UInt32, UInt16).self),
            let payloadLength = buffer.getInteger(at: start + 11 + Int(tokenLength), as: UInt16.self),
            buffer.readableBytes >= 13 + Int(tokenLength) + Int(payloadLength)
        else { return nil }
        let token = buffer.getSlice(at: start + 11, length: Int(tokenLength))
        let payload = buffer.getSlice(at: start + 13 + Int(tokenLength), length: Int(payloadLength))
        buffer.moveReaderIndex(forwardBy: 13 + Int(tokenLength) + Int(payloadLength))
        return .notification(.init(command: 1, identifier: identifier, token: token, payload: payload, expiration: expiry, priority: nil))
    }

    /// `| 2 | frame length (4) | items |`, each item `| id (1) | length (2) | data |`.
    private static func decodeCommand2(_ buffer: inout ByteBuffer) -> BinaryInboundMessage? {
        let start = buffer.readerIndex
        guard let frameLength = buffer.getInteger(at: start + 1, as: UInt32.self) else { return nil }
        guard frameLength <= Self.maximumFrameLength else {
            buffer.moveReaderIndex(forwardBy: buffer.readableBytes)
            return .unparseable(identifier: 0, reason: "frame length \(frameLength) exceeds \(Self.maximumFrameLength) bytes")
        }
        guard buffer.readableBytes >= 5 + Int(frameLength) else { return nil }
        var frame = buffer.getSlice(at: start + 5, length: Int(frameLength))!
        buffer.moveReaderIndex(forwardBy: 5 + Int(frameLength))

        var notification = BinaryInboundNotification(command: 2, identifier: 0, token: nil, payload: nil, expiration: nil, priority: nil)
        var seen: UInt8 = 0  // bit n set once item n was read
        var problem: String? = nil
        while frame.readableBytes > 0, problem == nil {
            guard let (item, length) = frame.readMultipleIntegers(as: (UInt8, UInt16).self),
                var data = frame.readSlice(length: Int(length))
            else {
                problem = "item header or data runs past the end of the frame"
                break
            }
            guard (1...5).contains(item) else {
                problem = "unknown item \(item)"
                break
            }
            guard seen & (1 << item) == 0 else {
                problem = "item \(item) appears twice"
                break
            }
            seen |= 1 << item
            switch item {
            case 1: notification.token = data
            case 2: notification.payload = data
            case 3:
                guard length == 4, let identifier = data.readInteger(as: UInt32.self) else { problem = "identifier item is \(length) bytes, not 4"; break }
                notification.identifier = identifier
            case 4:
                guard length == 4, let expiration = data.readInteger(as: UInt32.self) else { problem = "expiration item is \(length) bytes, not 4"; break }
                notification.expiration = expiration
            default:
                guard length == 1, let priority = data.readInteger(as: UInt8.self) else { problem = "priority item is \(length) bytes, not 1"; break }
                notification.priority = priority
            }
        }
        if let problem { return .unparseable(identifier: notification.identifier, reason: problem) }
        return .notification(notification)
    }
}
