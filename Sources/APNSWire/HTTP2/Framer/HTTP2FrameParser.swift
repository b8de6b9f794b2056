public import NIOCore

/// The HTTP/2 numbers an APNs connection writes and reads (RFC 9113).
public enum HTTP2Wire {
    /// The client connection preface, sent before the first SETTINGS frame.
    public static let preface: [UInt8] = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    /// Every frame starts with a 9-byte header: length (24 bits), type, flags, stream id (31 bits).
    public static let frameHeaderLength = 9
    /// `SETTINGS_MAX_FRAME_SIZE` until a peer says otherwise, and the largest frame this side accepts.
    public static let defaultMaxFrameSize = 16_384
    /// The largest flow-control window, and the largest stream id.
    public static let maxWindow = Int(Int32.max)

    public enum FrameType {
        public static let data: UInt8 = 0x0
        public static let headers: UInt8 = 0x1
        public static let priority: UInt8 = 0x2
        public static let rstStream: UInt8 = 0x3
        public static let settings: UInt8 = 0x4
        public static let pushPromise: UInt8 = 0x5
        public static let ping: UInt8 = 0x6
        public static let goAway: UInt8 = 0x7
        public static let windowUpdate: UInt8 = 0x8
        public static let continuation: UInt8 = 0x9
    }

    public enum Flag {
        /// DATA, HEADERS: the sender's last frame on the stream.
        public static let endStream: UInt8 = 0x1
        /// SETTINGS, PING: an acknowledgement.
        public static let ack: UInt8 = 0x1
        /// HEADERS, CONTINUATION: the header block is complete.
        public static let endHeaders: UInt8 = 0x4
        /// DATA, HEADERS: a pad-length octet and padding.
        public static let padded: UInt8 = 0x8
        /// HEADERS: five bytes of priority before the header block.
        public static let priority: UInt8 = 0x20
    }

    public enum ErrorCode {
        public static let noError: UInt32 = 0x0
        public static let protocolError: UInt32 = 0x1
        public static let internalError: UInt32 = 0x2
        public static let flowControlError: UInt32 = 0x3
        public static let streamClosed: UInt32 = 0x5
        public static let frameSizeError: UInt32 = 0x6
        public static let refusedStream: UInt32 = 0x7
        public static let cancel: UInt32 = 0x8
        public static let compressionError: UInt32 = 0x9

        /// The RFC's name for `code`, or its number.
        public static func name(_ code: UInt32) -> String {
            let names = [
                "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
                "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
                "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
            ]
            return code < names.count ? names[Int(code)] : "error code \(code)"
        }
    }

    public enum Setting {
        public static let headerTableSize: UInt16 = 0x1
        public static let enablePush: UInt16 = 0x2
        public static let maxConcurrentStreams: UInt16 = 0x3
        public static let initialWindowSize: UInt16 = 0x4
        public static let maxFrameSize: UInt16 = 0x5
        public static let maxHeaderListSize: UInt16 = 0x6
    }

    /// Writes a frame header for a payload of `length` bytes.
    @inlinable
    public static func writeFrameHeader(length: Int, type: UInt8, flags: UInt8, streamID: Int32, to buffer: inout ByteBuffer) {
        // The 24-bit length and the type in one big-endian word.
        buffer.writeInteger(UInt32(truncatingIfNeeded: length) << 8 | UInt32(type))
        buffer.writeInteger(flags)
        buffer.writeInteger(UInt32(bitPattern: streamID) & 0x7FFF_FFFF)
    }

    /// Fills in the frame header reserved at `index`, once the payload after it is written.
    @inlinable
    public static func setFrameHeader(at index: Int, type: UInt8, flags: UInt8, streamID: Int32, in buffer: inout ByteBuffer) {
        let length = buffer.writerIndex - index - Self.frameHeaderLength
        buffer.setInteger(UInt32(truncatingIfNeeded: length) << 8 | UInt32(type), at: index)
        buffer.setInteger(flags, at: index + 4)
        buffer.setInteger(UInt32(bitPattern: streamID) & 0x7FFF_FFFF, at: index + 5)
    }
}

/// A connection error (RFC 9113 §5.4.1): the peer broke the protocol, and the connection ends with
/// GOAWAY carrying ``code``.
public struct HTTP2ConnectionError: Error, Hashable, CustomStringConvertible {
    public var code: UInt32
    public var reason: String

    public init(code: UInt32, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public var description: String { "HTTP/2 \(HTTP2Wire.ErrorCode.name(self.code)): \(self.reason)" }
}

/// One frame read, as much of it as either side of an APNs connection needs. Payloads are slices
/// of the bytes read: nothing is copied.
public enum HTTP2InboundFrame: Sendable, Hashable {
    /// DATA. `flowControlledLength` is what the frame takes of the receive windows (its payload,
    /// padding and pad-length octet).
    case data(streamID: Int32, payload: ByteBuffer, flowControlledLength: Int, endStream: Bool)
    /// HEADERS or a CONTINUATION of it: a fragment of a header block.
    case headers(streamID: Int32, fragment: ByteBuffer, endHeaders: Bool, endStream: Bool)
    case continuation(streamID: Int32, fragment: ByteBuffer, endHeaders: Bool)
    case rstStream(streamID: Int32, errorCode: UInt32)
    /// SETTINGS (not an acknowledgement): the parameters in the order sent.
    case settings([HTTP2SettingValue])
    case settingsAck
    case ping(UInt64, ack: Bool)
    case goAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer)
    case windowUpdate(streamID: Int32, increment: Int)
    /// PRIORITY, or a frame type this client does not know (RFC 9113 §4.1: ignored).
    case ignored
}

public struct HTTP2SettingValue: Sendable, Hashable {
    public var identifier: UInt16
    public var value: UInt32

    public init(_ identifier: UInt16, _ value: UInt32) {
        self.identifier = identifier
        self.value = value
    }
}

/// Cuts the bytes read into frames and checks what RFC 9113 makes a connection error at this level:
/// lengths, stream ids, padding, a header block interrupted by another frame, a push (neither side
/// of an APNs connection accepts one). Frames may arrive split across reads and several in one read.
public struct HTTP2FrameParser: Sendable {
    /// The largest frame payload accepted: this side's `SETTINGS_MAX_FRAME_SIZE`.
    public let maxFrameSize: Int
    /// The stream whose header block awaits CONTINUATION frames, if any.
    private var continuing: Int32?

    public init(maxFrameSize: Int = HTTP2Wire.defaultMaxFrameSize) {
        self.maxFrameSize = maxFrameSize
    }

    /// The next whole frame at the front of `buffer`, consumed; nil (and nothing consumed) while the
    /// frame is incomplete.
    public mutating func next(from buffer: inout ByteBuffer) throws(HTTP2ConnectionError) -> HTTP2InboundFrame? {
        guard buffer.readableBytes >= HTTP2Wire.frameHeaderLength else { return nil }
        let start = buffer.readerIndex
        let length = Int(buffer.getInteger(at: start, as: UInt8.self)!) << 16 | Int(buffer.getInteger(at: start + 1, as: UInt16.self)!)
        let type = buffer.getInteger(at: start + 3, as: UInt8.self)!
        let flags = buffer.getInteger(at: start + 4, as: UInt8.self)!
        let streamID = Int32(bitPattern: buffer.getInteger(at: start + 5, as: UInt32.self)! & 0x7FFF_FFFF)
        guard length <= self.maxFrameSize else {
            throw HTTP2ConnectionError(
                code: HTTP2Wire.ErrorCode.frameSizeError,
                "a frame of type \(type) declares \(length) bytes, more than the \(self.maxFrameSize) allowed"
            )
        }
        guard buffer.readableBytes >= HTTP2Wire.frameHeaderLength + length else { return nil }
        buffer.moveReaderIndex(forwardBy: HTTP2Wire.frameHeaderLength)
        var payload = buffer.readSlice(length: length)!

        if let continuing = self.continuing, type != HTTP2Wire.FrameType.continuation || streamID != continuing {
            throw HTTP2ConnectionError(
                code: HTTP2Wire.ErrorCode.protocolError,
                "a frame of type \(type) on stream \(streamID) interrupts stream \(continuing)'s header block"
            )
        }
        switch type {
        case HTTP2Wire.FrameType.data:
            try Self.requireStream(streamID, type: "DATA")
            let flowControlled = length
            try Self.removePadding(&payload, flags: flags, type: "DATA")
            return .data(
                streamID: streamID, payload: payload, flowControlledLength: flowControlled,
                endStream: flags & HTTP2Wire.Flag.endStream != 0
            )
        case HTTP2Wire.FrameType.headers:
            try Self.requireStream(streamID, type: "HEADERS")
            try Self.removePadding(&payload, flags: flags, type: "HEADERS")
            if flags & HTTP2Wire.Flag.priority != 0 {
                guard payload.readableBytes >= 5 else {
                    throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.frameSizeError, "HEADERS with priority has \(payload.readableBytes) bytes after padding, fewer than 5")
                }
                payload.moveReaderIndex(forwardBy: 5)
            }
            let endHeaders = flags & HTTP2Wire.Flag.endHeaders != 0
            self.continuing = endHeaders ? nil : streamID
            return .headers(streamID: streamID, fragment: payload, endHeaders: endHeaders, endStream: flags & HTTP2Wire.Flag.endStream != 0)
        case HTTP2Wire.FrameType.continuation:
            guard self.continuing != nil else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "CONTINUATION on stream \(streamID) follows no HEADERS")
            }
            let endHeaders = flags & HTTP2Wire.Flag.endHeaders != 0
            if endHeaders { self.continuing = nil }
            return .continuation(streamID: streamID, fragment: payload, endHeaders: endHeaders)
        case HTTP2Wire.FrameType.priority:
            try Self.requireStream(streamID, type: "PRIORITY")
            try Self.requireLength(length, 5, type: "PRIORITY")
            return .ignored
        case HTTP2Wire.FrameType.rstStream:
            try Self.requireStream(streamID, type: "RST_STREAM")
            try Self.requireLength(length, 4, type: "RST_STREAM")
            return .rstStream(streamID: streamID, errorCode: payload.readInteger()!)
        case HTTP2Wire.FrameType.settings:
            try Self.requireConnection(streamID, type: "SETTINGS")
            if flags & HTTP2Wire.Flag.ack != 0 {
                try Self.requireLength(length, 0, type: "SETTINGS acknowledgement")
                return .settingsAck
            }
            guard length % 6 == 0 else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.frameSizeError, "SETTINGS of \(length) bytes, not a multiple of 6")
            }
            var settings: [HTTP2SettingValue] = []
            settings.reserveCapacity(length / 6)
            while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
                settings.append(HTTP2SettingValue(identifier, value))
            }
            return .settings(settings)
        case HTTP2Wire.FrameType.pushPromise:
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "PUSH_PROMISE on stream \(streamID), which neither side of an APNs connection accepts")
        case HTTP2Wire.FrameType.ping:
            try Self.requireConnection(streamID, type: "PING")
            try Self.requireLength(length, 8, type: "PING")
            return .ping(payload.readInteger()!, ack: flags & HTTP2Wire.Flag.ack != 0)
        case HTTP2Wire.FrameType.goAway:
            try Self.requireConnection(streamID, type: "GOAWAY")
            guard length >= 8 else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.frameSizeError, "GOAWAY of \(length) bytes, fewer than 8")
            }
            let lastStreamID = Int32(bitPattern: payload.readInteger(as: UInt32.self)! & 0x7FFF_FFFF)
            let errorCode: UInt32 = payload.readInteger()!
            return .goAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: payload)
        case HTTP2Wire.FrameType.windowUpdate:
            try Self.requireLength(length, 4, type: "WINDOW_UPDATE")
            let increment = Int(payload.readInteger(as: UInt32.self)! & 0x7FFF_FFFF)
            guard increment > 0 else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "WINDOW_UPDATE of 0 bytes on stream \(streamID)")
            }
            return .windowUpdate(streamID: streamID, increment: increment)
        default:
            return .ignored
        }
    }

    private static func requireStream(_ streamID: Int32, type: String) throws(HTTP2ConnectionError) {
        guard streamID != 0 else { throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "\(type) on stream 0") }
    }

    private static func requireConnection(_ streamID: Int32, type: String) throws(HTTP2ConnectionError) {
        guard streamID == 0 else {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "\(type) on stream \(streamID), not on the connection")
        }
    }

    private static func requireLength(_ length: Int, _ expected: Int, type: String) throws(HTTP2ConnectionError) {
        guard length == expected else {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.frameSizeError, "\(type) of \(length) bytes, not \(expected)")
        }
    }

    /// Strips the pad-length octet and the padding of a padded frame.
    private static func removePadding(_ payload: inout ByteBuffer, flags: UInt8, type: String) throws(HTTP2ConnectionError) {
        guard flags & HTTP2Wire.Flag.padded != 0 else { return }
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else {
            throw HTTP2ConnectionError(
                code: HTTP2Wire.ErrorCode.protocolError, "\(type) padding longer than its \(payload.readableBytes)-byte payload"
            )
        }
        payload = payload.getSlice(at: payload.readerIndex, length: payload.readableBytes - Int(padding))!
    }
}

/// Joins a header block sent as HEADERS and CONTINUATION frames (the parser has checked that
/// nothing came between them), up to ``maximumSize`` bytes. `Context` is what the owner needs to
/// remember of the HEADERS frame.
struct HTTP2HeaderBlockAssembler<Context> {
    /// The largest header block accepted, across CONTINUATION frames.
    static var maximumSize: Int { 1 << 16 }

    struct Block {
        var streamID: Int32
        var endStream: Bool
        var context: Context
        var bytes: ByteBuffer
    }

    private var pending: Block?

    /// A HEADERS frame without END_HEADERS: its block waits for the CONTINUATION that ends it.
    mutating func begin(streamID: Int32, fragment: ByteBuffer, endStream: Bool, context: Context) {
        // A copy: the fragment is a slice of the bytes read, and is appended to.
        self.pending = Block(streamID: streamID, endStream: endStream, context: context, bytes: ByteBuffer(buffer: fragment))
    }

    /// A CONTINUATION frame: the whole block once it ends.
    mutating func continuation(fragment: ByteBuffer, endHeaders: Bool) throws(HTTP2ConnectionError) -> Block? {
        guard var block = self.pending else { return nil }
        guard block.bytes.readableBytes + fragment.readableBytes <= Self.maximumSize else {
            throw HTTP2ConnectionError(
                code: HTTP2Wire.ErrorCode.protocolError, "a header block on stream \(block.streamID) longer than \(Self.maximumSize) bytes"
            )
        }
        var fragment = fragment
        block.bytes.writeBuffer(&fragment)
        self.pending = endHeaders ? nil : block
        return endHeaders ? block : nil
    }
}
