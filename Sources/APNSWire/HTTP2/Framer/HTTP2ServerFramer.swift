public import NIOCore

/// The server side of one HTTP/2 connection, framed by hand for a gateway that takes APNs
/// requests and answers each with HEADERS and at most one small DATA frame. Performs no I/O and
/// reads no clock: the connection's handler feeds it what TLS decrypted and writes what it hands
/// out.
///
/// What RFC 9113 asks of a server is kept:
///
/// - The client's preface, then its SETTINGS first; SETTINGS acknowledged and applied (the stream
///   windows, the frame size, the header table size the answers may use); PING answered.
/// - Streams: client streams are odd and rising; HEADERS on a closed stream, DATA on an idle one,
///   and a frame on an even one are connection errors. A header block breaking RFC 9113 §8.2-8.3
///   (an uppercase or connection-specific name, a pseudo-header after a field or unknown or twice, a
///   request without `:method`, `:scheme` or `:path`) is a stream error: RST_STREAM PROTOCOL_ERROR,
///   as is DATA after a stream's END_STREAM. Frames on a stream this side has closed are ignored.
/// - Receiving: DATA beyond the window this side granted, on the connection or a stream, is a
///   FLOW_CONTROL_ERROR. The connection window is the owner's to refund
///   (``windowUpdate(_:)``); a stream's is never refunded, as no request body comes near it.
/// - Sending: an answer's DATA goes only within the connection's and its stream's send windows;
///   what does not fit waits, in order, for WINDOW_UPDATE or SETTINGS.
///
/// The stream limit it announces is the owner's to enforce (``reset(streamID:errorCode:)`` with
/// REFUSED_STREAM): APNs refuses a stream beyond it rather than ending the connection.
public struct HTTP2ServerFramer {
    /// What the bytes read meant, in order.
    public enum Event {
        /// A stream's header block: its request headers, or (on a stream already open) trailers.
        case headers(streamID: Int32, fields: [HTTP2HeaderField], endStream: Bool)
        /// Request body bytes (the frame's payload, without padding; a slice of the bytes read).
        case data(streamID: Int32, payload: ByteBuffer, flowControlledLength: Int, endStream: Bool)
        /// The client reset the stream, or this side did for a stream error (already written).
        case reset(streamID: Int32)
        case ping
        /// The acknowledgement of this side's ``ping()``.
        case pingAnswered
        case goAway(lastStreamID: Int32, errorCode: UInt32)
    }

    private enum StreamState {
        /// The request is still arriving; `window` is what the client may still send.
        case receiving(window: Int)
        /// The request is in; the answer is not yet all written.
        case answering
    }

    private struct Stream {
        var state: StreamState
        /// Send window granted by WINDOW_UPDATE before the answer's DATA was written.
        var credit = 0
    }

    /// This side's SETTINGS.
    private let settings: [HTTP2SettingValue]

    // Reading.
    private var sawPreface = false
    private var sawSettings = false
    private var parser: HTTP2FrameParser
    private var decoder = HPACKHeaderDecoder()
    /// Header blocks arriving in pieces, with whether each opens its stream.
    private var blocks = HTTP2HeaderBlockAssembler<Bool>()
    private var streams: [Int32: Stream] = [:]
    /// The highest stream the client opened.
    public private(set) var highestStreamID: Int32 = 0
    /// What the client may still send on the connection.
    private var receiveWindow = HTTP2InboundWindow.protocolDefault
    /// The stream window this side announced.
    private let initialReceiveWindow: Int

    // Writing.
    private var output: HTTP2FrameOutput
    /// The send windows, and answer bodies waiting for them, in order.
    private var blocked = HTTP2SendQueue()
    /// A dynamic table size update the next answer must start with (the client lowered it).
    private var tableSizeUpdate: Int?

    /// - Parameter settings: this side's SETTINGS, written by ``start()``; its
    ///   `SETTINGS_INITIAL_WINDOW_SIZE` and `SETTINGS_MAX_FRAME_SIZE` are enforced.
    public init(settings: [HTTP2SettingValue], allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        var window = HTTP2InboundWindow.protocolDefault
        var frameSize = HTTP2Wire.defaultMaxFrameSize
        for setting in settings {
            if setting.identifier == HTTP2Wire.Setting.initialWindowSize { window = Int(setting.value) }
            if setting.identifier == HTTP2Wire.Setting.maxFrameSize { frameSize = Int(setting.value) }
        }
        self.initialReceiveWindow = window
        self.parser = HTTP2FrameParser(maxFrameSize: frameSize)
        self.output = HTTP2FrameOutput(allocator: allocator)
        self.settings = settings
    }

    /// This side's SETTINGS, the server's connection preface.
    public mutating func start() {
        self.output.writeSettings(self.settings)
    }

    /// The bytes to write, if any; the storage is reused once the caller has let go of it.
    public mutating func take() -> ByteBuffer? {
        self.output.take()
    }

    // MARK: - Writing

    /// An answer: HEADERS with `:status`, `apns-id` and, with a body, `content-type:
    /// application/json`; then the body as DATA ending the stream (as much as the send windows
    /// allow, the rest once they do).
    public mutating func writeAnswer(streamID: Int32, status: Int, apnsID: String, body: ByteBuffer?) {
        self.writeAnswerHeaders(streamID: streamID, status: status, apnsID: apnsID, hasBody: body != nil)
        if let body { self.writeAnswerBody(streamID: streamID, body) }
    }

    /// An answer's HEADERS, ending the stream unless `hasBody` (``writeAnswerBody(streamID:_:)``
    /// then follows).
    public mutating func writeAnswerHeaders(streamID: Int32, status: Int, apnsID: String, hasBody: Bool) {
        guard self.streams[streamID] != nil else { return }
        var output = self.output.open()
        let start = output.writerIndex
        output.writeRepeatingByte(0, count: HTTP2Wire.frameHeaderLength)
        if let size = self.tableSizeUpdate {
            self.tableSizeUpdate = nil
            HPACKRequestEncoder.writeInteger(size, prefix: 5, flags: 0x20, into: &output)
        }
        if let index = Self.staticStatusIndex(status) {
            output.writeInteger(0x80 | index)
        } else {
            output.writeInteger(UInt8(0x08))  // without indexing, the name `:status` (8)
            output.writeInteger(UInt8(3))
            output.writeString(String(status))
        }
        output.writeInteger(UInt8(0x00))  // without indexing, a new name
        output.writeInteger(UInt8(7))
        output.writeStaticString("apns-id")
        HPACKRequestEncoder.writeInteger(apnsID.utf8.count, prefix: 7, flags: 0, into: &output)
        output.writeString(apnsID)
        if hasBody {
            output.writeInteger(UInt8(0x0F))  // without indexing, the name `content-type` (31)
            output.writeInteger(UInt8(0x10))
            output.writeInteger(UInt8(16))
            output.writeStaticString("application/json")
        }
        let flags = HTTP2Wire.Flag.endHeaders | (hasBody ? 0 : HTTP2Wire.Flag.endStream)
        HTTP2Wire.setFrameHeader(at: start, type: HTTP2Wire.FrameType.headers, flags: flags, streamID: streamID, in: &output)
        self.output.close(consume output)
        if !hasBody { self.closeStream(streamID) }
    }

    /// An answer's body, after its HEADERS: DATA ending the stream, within the send windows.
    public mutating func writeAnswerBody(streamID: Int32, _ body: ByteBuffer) {
        guard let stream = self.streams[streamID] else { return }
        self.blocked.append(streamID: streamID, body, window: self.blocked.initialStreamWindow + stream.credit)
        self.sendBlocked()
    }

    /// RST_STREAM: the stream is closed from now on, and later frames on it are ignored.
    public mutating func reset(streamID: Int32, errorCode: UInt32) {
        self.closeStream(streamID)
        self.blocked.removeAll { $0 == streamID }
        self.output.writeFrame(type: HTTP2Wire.FrameType.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(errorCode) }
    }

    /// SETTINGS with a new stream limit.
    public mutating func announce(maxConcurrentStreams: Int) {
        self.output.writeSettings([HTTP2SettingValue(HTTP2Wire.Setting.maxConcurrentStreams, UInt32(maxConcurrentStreams))])
    }

    /// Refunds `increment` bytes of the connection's receive window.
    public mutating func windowUpdate(_ increment: Int) {
        self.receiveWindow += increment
        self.output.writeWindowUpdate(streamID: 0, increment)
    }

    /// A PING; its acknowledgement is reported as ``Event/pingAnswered``.
    public mutating func ping() {
        self.output.writeFrame(type: HTTP2Wire.FrameType.ping, flags: 0, streamID: 0) { $0.writeInteger(UInt64(0)) }
    }

    /// GOAWAY naming `lastStreamID`.
    public mutating func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer?) {
        self.output.writeGoAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData)
    }

    /// GOAWAY for a connection error, naming the highest stream the client opened.
    public mutating func fail(_ error: HTTP2ConnectionError) {
        self.goAway(lastStreamID: self.highestStreamID, errorCode: error.code, debugData: nil)
    }

    private static func staticStatusIndex(_ status: Int) -> UInt8? {
        switch status {
        case 200: 8
        case 204: 9
        case 206: 10
        case 304: 11
        case 400: 12
        case 404: 13
        case 500: 14
        default: nil
        }
    }

    private mutating func closeStream(_ streamID: Int32) {
        self.streams.removeValue(forKey: streamID)
    }

    /// Writes as much of the waiting answer bodies as the send windows allow, in order.
    private mutating func sendBlocked() {
        self.blocked.send(into: &self.output) { streamID in
            self.streams.removeValue(forKey: streamID)
        }
    }

    // MARK: - Reading

    /// Reads every whole frame at the front of `bytes` (what remains is incomplete: keep it and
    /// append the next read), handing what they mean to `handle`. Acknowledgements, and resets for
    /// stream errors, are written for the next ``take()``.
    public mutating func read(_ bytes: inout ByteBuffer, _ handle: (Event) -> Void) throws(HTTP2ConnectionError) {
        if !self.sawPreface {
            let length = min(bytes.readableBytes, HTTP2Wire.preface.count)
            guard bytes.readableBytesView.prefix(length).elementsEqual(HTTP2Wire.preface.prefix(length)) else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "the client's first bytes are not the HTTP/2 connection preface")
            }
            guard length == HTTP2Wire.preface.count else { return }
            bytes.moveReaderIndex(forwardBy: length)
            self.sawPreface = true
        }
        while let frame = try self.parser.next(from: &bytes) {
            try self.read(frame, handle)
        }
    }

    private mutating func read(_ frame: HTTP2InboundFrame, _ handle: (Event) -> Void) throws(HTTP2ConnectionError) {
        if !self.sawSettings {
            guard case .settings = frame else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "the client's first frame is not SETTINGS")
            }
        }
        switch frame {
        case .headers(let streamID, let fragment, let endHeaders, let endStream):
            let opens = try self.opens(streamID)
            if endHeaders {
                try self.headerBlock(fragment, streamID: streamID, endStream: endStream, opens: opens, handle)
            } else {
                self.blocks.begin(streamID: streamID, fragment: fragment, endStream: endStream, context: opens)
            }
        case .continuation(_, let fragment, let endHeaders):
            if let block = try self.blocks.continuation(fragment: fragment, endHeaders: endHeaders) {
                try self.headerBlock(block.bytes, streamID: block.streamID, endStream: block.endStream, opens: block.context, handle)
            }
        case .data(let streamID, let payload, let length, let endStream):
            try self.data(streamID: streamID, payload: payload, flowControlledLength: length, endStream: endStream, handle)
        case .settings(let settings):
            try self.apply(settings)
        case .settingsAck:
            break
        case .ping(let data, ack: false):
            self.output.writeFrame(type: HTTP2Wire.FrameType.ping, flags: HTTP2Wire.Flag.ack, streamID: 0) { $0.writeInteger(data) }
            handle(.ping)
        case .ping(_, ack: true):
            handle(.pingAnswered)
        case .goAway(let lastStreamID, let errorCode, _):
            handle(.goAway(lastStreamID: lastStreamID, errorCode: errorCode))
        case .rstStream(let streamID, _):
            guard streamID <= self.highestStreamID else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "RST_STREAM on idle stream \(streamID)")
            }
            if self.streams[streamID] != nil {
                self.closeStream(streamID)
                self.blocked.removeAll { $0 == streamID }
                handle(.reset(streamID: streamID))
            }
        case .windowUpdate(let streamID, let increment):
            try self.windowUpdate(streamID: streamID, increment: increment)
        case .ignored:
            break
        }
    }

    /// Checks a HEADERS frame's stream: whether it opens a new one (odd, above every earlier one)
    /// or carries trailers of an open one; a closed one is a connection error.
    private mutating func opens(_ streamID: Int32) throws(HTTP2ConnectionError) -> Bool {
        guard streamID & 1 == 1 else {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "HEADERS on even stream \(streamID), which a client may not open")
        }
        if streamID > self.highestStreamID {
            self.highestStreamID = streamID
            return true
        }
        guard self.streams[streamID] != nil else {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.streamClosed, "HEADERS on closed stream \(streamID)")
        }
        return false
    }

    private mutating func headerBlock(
        _ block: ByteBuffer, streamID: Int32, endStream: Bool, opens: Bool, _ handle: (Event) -> Void
    ) throws(HTTP2ConnectionError) {
        // Decoded whatever the stream's state: the HPACK state is the connection's.
        var fields: [HTTP2HeaderField] = []
        fields.reserveCapacity(12)
        _ = try self.decoder.decode(block, into: &fields)
        if opens {
            if Self.requestProblem(fields) != nil {
                self.reset(streamID: streamID, errorCode: HTTP2Wire.ErrorCode.protocolError)
                return
            }
            self.streams[streamID] = Stream(state: endStream ? .answering : .receiving(window: self.initialReceiveWindow))
        } else {
            // Trailers: only while the request is arriving, and they end it.
            guard case .receiving = self.streams[streamID]?.state, Self.trailerProblem(fields, endStream: endStream) == nil else {
                self.streamError(streamID, handle)
                return
            }
            self.streams[streamID]?.state = .answering
        }
        handle(.headers(streamID: streamID, fields: fields, endStream: endStream))
    }

    /// RST_STREAM PROTOCOL_ERROR for a stream the owner knows, and its ``Event/reset(streamID:)``.
    private mutating func streamError(_ streamID: Int32, code: UInt32 = HTTP2Wire.ErrorCode.protocolError, _ handle: (Event) -> Void) {
        self.reset(streamID: streamID, errorCode: code)
        handle(.reset(streamID: streamID))
    }

    private mutating func data(
        streamID: Int32, payload: ByteBuffer, flowControlledLength length: Int, endStream: Bool, _ handle: (Event) -> Void
    ) throws(HTTP2ConnectionError) {
        guard length <= self.receiveWindow else {
            throw HTTP2ConnectionError(
                code: HTTP2Wire.ErrorCode.flowControlError, "\(length) bytes of DATA with \(self.receiveWindow) left in the connection's window"
            )
        }
        self.receiveWindow -= length
        guard streamID <= self.highestStreamID, streamID & 1 == 1 else {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "DATA on idle stream \(streamID)")
        }
        // Bytes the stream does not take still count on the connection: the owner refunds them.
        let ignored = Event.data(streamID: streamID, payload: ByteBuffer(), flowControlledLength: length, endStream: false)
        switch self.streams[streamID]?.state {
        case nil:
            // Closed by this side (answered or reset): the client may not know yet.
            handle(ignored)
        case .answering:
            self.streamError(streamID, code: HTTP2Wire.ErrorCode.streamClosed, handle)
            handle(ignored)
        case .receiving(let window):
            guard length <= window else {
                self.streamError(streamID, code: HTTP2Wire.ErrorCode.flowControlError, handle)
                handle(ignored)
                return
            }
            self.streams[streamID]?.state = endStream ? .answering : .receiving(window: window - length)
            handle(.data(streamID: streamID, payload: payload, flowControlledLength: length, endStream: endStream))
        }
    }

    private mutating func apply(_ settings: [HTTP2SettingValue]) throws(HTTP2ConnectionError) {
        for setting in settings {
            guard try !self.blocked.apply(setting) else { continue }
            let value = Int(setting.value)
            if setting.identifier == HTTP2Wire.Setting.headerTableSize, value < 4_096 {
                // Answers use no dynamic table; a lower maximum is still signalled (RFC 7541 §4.2).
                self.tableSizeUpdate = min(self.tableSizeUpdate ?? value, value)
            }
        }
        self.output.writeFrame(type: HTTP2Wire.FrameType.settings, flags: HTTP2Wire.Flag.ack, streamID: 0) { _ in }
        self.sawSettings = true
        self.sendBlocked()
    }

    private mutating func windowUpdate(streamID: Int32, increment: Int) throws(HTTP2ConnectionError) {
        if streamID == 0 {
            try self.blocked.grantConnection(increment)
        } else if try self.blocked.grant(increment, to: streamID) {
            // A body waiting: its window took the credit.
        } else if let stream = self.streams[streamID] {
            try HTTP2SendQueue.checkWindow(self.blocked.initialStreamWindow + stream.credit + increment, of: streamID)
            self.streams[streamID]?.credit += increment
        } else if streamID > self.highestStreamID {
            throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "WINDOW_UPDATE on idle stream \(streamID)")
        }
        self.sendBlocked()
    }

    // MARK: - Header rules (RFC 9113 §8.2, §8.3)

    /// Why a request's header block is malformed, or nil.
    static func requestProblem(_ fields: [HTTP2HeaderField]) -> String? {
        var seen: UInt8 = 0
        var regular = false
        for field in fields {
            if field.isPseudoHeader {
                guard !regular else { return "pseudo-header \(field.name) after a regular field" }
                let bit: UInt8 = switch field.name {
                case ":method": 1
                case ":scheme": 2
                case ":path": 4
                case ":authority": 8
                default: 0
                }
                guard bit != 0 else { return "pseudo-header \(field.name) in a request" }
                guard seen & bit == 0 else { return "pseudo-header \(field.name) twice" }
                guard !field.value.isEmpty || bit == 8 else { return "pseudo-header \(field.name) empty" }
                seen |= bit
            } else {
                regular = true
                if let problem = field.problem { return problem }
            }
        }
        guard seen & 7 == 7 else { return "no " + (seen & 1 == 0 ? ":method" : seen & 2 == 0 ? ":scheme" : ":path") }
        return nil
    }

    static func trailerProblem(_ fields: [HTTP2HeaderField], endStream: Bool) -> String? {
        guard endStream else { return "trailers without END_STREAM" }
        for field in fields {
            if field.isPseudoHeader { return "pseudo-header \(field.name) in trailers" }
            if let problem = field.problem { return problem }
        }
        return nil
    }
}
