public import NIOCore

/// The client side of one HTTP/2 connection to APNs, framed by hand: the bytes to write and what the
/// bytes read mean. Performs no I/O and reads no clock; the transport feeds it what TLS decrypted
/// and writes what it hands out.
///
/// Only what a client of APNs needs is built: requests are HEADERS (see ``HPACKRequestEncoder``)
/// and DATA written straight into one buffer per batch; answers are read for `:status` and the
/// body (``HPACKAnswerDecoder``). What RFC 9113 asks of any client is kept:
///
/// - SETTINGS are acknowledged and applied: the stream limit (reported), the initial stream
///   window, the frame size and the header table size the requests may use.
/// - Sending: a request's DATA goes only within the connection's and its stream's send windows.
///   DATA that does not fit waits, in stream order, for WINDOW_UPDATE or SETTINGS, and no request
///   should be written meanwhile (``acceptsRequests``); a stream answered or reset before its body
///   went out has the rest dropped (and is cancelled, if answered).
/// - Answers: interim ones (1xx) are skipped; a reset after the final status keeps the answer.
/// - Receiving: answer bodies (every rejection carries one) are counted against the connection's
///   window and, while a stream stays open, its own, and `WINDOW_UPDATE` goes out as
///   ``HTTP2InboundWindow`` decides, so any number of rejections never stall the connection.
/// - PING is answered. A peer that breaks the protocol is reported as ``HTTP2ConnectionError``;
///   ``fail(_:)`` writes the GOAWAY that ends the connection.
public struct HTTP2ClientFramer {
    /// What the bytes read meant, in order.
    public enum Event {
        /// The server's SETTINGS, with its `SETTINGS_MAX_CONCURRENT_STREAMS` if it sent one.
        case settings(maxConcurrentStreams: Int?)
        /// A stream's answer: its `:status` (0 if it had none) and its body, if any.
        case answered(streamID: Int32, status: Int, body: ByteBuffer?)
        /// RST_STREAM; `refused` for REFUSED_STREAM (the request was not processed).
        case reset(streamID: Int32, refused: Bool)
        case goAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer)
        case pingAnswered
    }

    /// What this client announces: no push, no streams from the server, no dynamic table for the
    /// answers (nothing in them repeats but `:status`, which is in the static table).
    public static let settings = [
        HTTP2SettingValue(HTTP2Wire.Setting.enablePush, 0),
        HTTP2SettingValue(HTTP2Wire.Setting.maxConcurrentStreams, 0),
        HTTP2SettingValue(HTTP2Wire.Setting.headerTableSize, 0),
        HTTP2SettingValue(HTTP2Wire.Setting.maxHeaderListSize, 1 << 16),
    ]
    /// The largest header block accepted, across CONTINUATION frames.
    public static var maximumHeaderBlock: Int { HTTP2HeaderBlockAssembler<Void>.maximumSize }

    // Reading.
    private var parser = HTTP2FrameParser()
    private var decoder = HPACKAnswerDecoder()
    private var sawSettings = false
    /// Header blocks arriving in pieces.
    private var blocks = HTTP2HeaderBlockAssembler<Void>()
    /// Answers whose HEADERS came without END_STREAM: their status, the body so far, and the
    /// stream's receive window.
    private var partial: [Int32: (status: Int, body: ByteBuffer?, window: HTTP2InboundWindow)] = [:]
    private var receiveWindow: HTTP2InboundWindow

    // Writing.
    private var encoder: HPACKRequestEncoder
    private var output: HTTP2FrameOutput
    public var peerMaxFrameSize: Int { self.blocked.maxFrameSize }
    /// Bytes of DATA the connection may still send.
    public var sendWindow: Int { self.blocked.connectionWindow }
    /// The peer's `SETTINGS_INITIAL_WINDOW_SIZE`: each new stream's send window.
    public var initialStreamWindow: Int { self.blocked.initialStreamWindow }
    /// The send windows, and request bodies waiting for them, in stream order.
    private var blocked = HTTP2SendQueue()

    /// - Parameters:
    ///   - authority: `:authority` of every request.
    ///   - receiveWindow: the connection receive window to keep open, in bytes.
    public init(authority: String, receiveWindow: Int, allocator: ByteBufferAllocator = ByteBufferAllocator()) {
        self.encoder = HPACKRequestEncoder(authority: authority)
        self.receiveWindow = HTTP2InboundWindow(target: receiveWindow)
        self.output = HTTP2FrameOutput(allocator: allocator)
    }

    /// The connection preface, SETTINGS and the receive window's first credit.
    public mutating func start() {
        self.output.write { $0.writeBytes(HTTP2Wire.preface) }
        self.output.writeSettings(Self.settings)
        if let increment = self.receiveWindow.initialIncrement { self.output.writeWindowUpdate(streamID: 0, increment) }
    }

    /// The bytes to write, if any; the storage is reused for a later batch once the caller has let
    /// go of it (a TLS handler, once it encrypted them).
    public mutating func take() -> ByteBuffer? {
        self.output.take()
    }

    // MARK: - Writing

    /// Whether a request written now goes out whole: no body waits for send window, and the
    /// connection has some.
    public var acceptsRequests: Bool { self.blocked.isEmpty && self.sendWindow > 0 }

    /// Request bodies waiting for send window.
    public var blockedRequests: Int { self.blocked.count }

    /// Writes one request: HEADERS, then the payload as DATA ending the stream (or as much of it as
    /// the send windows allow, the rest once they do).
    /// - Parameter authorization: the provider token's compact form, for token authentication.
    public mutating func writeRequest(streamID: Int32, notification: HTTP2Notification, authorization: String?) {
        let maxFrameSize = self.peerMaxFrameSize
        var output = self.output.open()
        let start = output.writerIndex
        output.writeRepeatingByte(0, count: HTTP2Wire.frameHeaderLength)
        self.encoder.writeBlock(for: notification.token, template: notification.template, authorization: authorization, into: &output)
        if output.writerIndex - start - HTTP2Wire.frameHeaderLength <= maxFrameSize {
            HTTP2Wire.setFrameHeader(at: start, type: HTTP2Wire.FrameType.headers, flags: HTTP2Wire.Flag.endHeaders, streamID: streamID, in: &output)
        } else {
            Self.splitHeaderBlock(of: streamID, at: start, maxFrameSize: maxFrameSize, in: &output)
        }
        let payload = notification.payload
        if self.blocked.isEmpty, payload.readableBytes <= min(self.sendWindow, self.initialStreamWindow, maxFrameSize) {
            self.blocked.connectionWindow -= payload.readableBytes
            HTTP2Wire.writeFrameHeader(
                length: payload.readableBytes, type: HTTP2Wire.FrameType.data, flags: HTTP2Wire.Flag.endStream, streamID: streamID, to: &output
            )
            output.writeImmutableBuffer(payload)
            self.output.close(consume output)
        } else {
            self.output.close(consume output)
            self.blocked.append(streamID: streamID, payload, window: self.initialStreamWindow)
            self.sendBlocked()
        }
    }

    /// A PING; its acknowledgement is reported as ``Event/pingAnswered``.
    public mutating func ping() {
        self.output.writeFrame(type: HTTP2Wire.FrameType.ping, flags: 0, streamID: 0) { $0.writeInteger(UInt64(0)) }
    }

    /// GOAWAY for `error` (no stream of the server's was processed: there are none).
    public mutating func fail(_ error: HTTP2ConnectionError) {
        self.output.writeGoAway(lastStreamID: 0, errorCode: error.code)
    }

    /// Rewrites a header block larger than the peer's frame size as HEADERS and CONTINUATION frames.
    private static func splitHeaderBlock(of streamID: Int32, at start: Int, maxFrameSize: Int, in output: inout ByteBuffer) {
        let length = output.writerIndex - start - HTTP2Wire.frameHeaderLength
        // A copy: the frames are written over the block's own bytes.
        var block = ByteBuffer(buffer: output.getSlice(at: start + HTTP2Wire.frameHeaderLength, length: length)!)
        output.moveWriterIndex(to: start)
        var type = HTTP2Wire.FrameType.headers
        while block.readableBytes > 0 {
            let piece = block.readSlice(length: min(block.readableBytes, maxFrameSize))!
            let flags = block.readableBytes == 0 ? HTTP2Wire.Flag.endHeaders : 0
            HTTP2Wire.writeFrameHeader(length: piece.readableBytes, type: type, flags: flags, streamID: streamID, to: &output)
            output.writeImmutableBuffer(piece)
            type = HTTP2Wire.FrameType.continuation
        }
    }

    /// Writes as much of the waiting request bodies as the send windows allow, in order.
    private mutating func sendBlocked() {
        self.blocked.send(into: &self.output)
    }

    // MARK: - Reading

    /// Reads every whole frame at the front of `bytes` (what remains is an incomplete frame: keep
    /// it and append the next read), handing what they mean to `handle`. Acknowledgements and
    /// credit they call for are written for the next ``take()``.
    public mutating func read(_ bytes: inout ByteBuffer, _ handle: (Event) -> Void) throws(HTTP2ConnectionError) {
        while let frame = try self.parser.next(from: &bytes) {
            try self.read(frame, handle)
        }
    }

    private mutating func read(_ frame: HTTP2InboundFrame, _ handle: (Event) -> Void) throws(HTTP2ConnectionError) {
        if !self.sawSettings {
            guard case .settings = frame else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "the server's first frame is not SETTINGS")
            }
        }
        switch frame {
        case .headers(let streamID, let fragment, let endHeaders, let endStream):
            if endHeaders {
                try self.headerBlock(fragment, streamID: streamID, endStream: endStream, handle)
            } else {
                self.blocks.begin(streamID: streamID, fragment: fragment, endStream: endStream, context: ())
            }
        case .continuation(_, let fragment, let endHeaders):
            if let block = try self.blocks.continuation(fragment: fragment, endHeaders: endHeaders) {
                try self.headerBlock(block.bytes, streamID: block.streamID, endStream: block.endStream, handle)
            }
        case .data(let streamID, let payload, let length, let endStream):
            self.data(payload, streamID: streamID, flowControlledLength: length, endStream: endStream, handle)
        case .settings(let settings):
            handle(.settings(maxConcurrentStreams: try self.apply(settings)))
        case .settingsAck:
            // From now on the server's answers use no dynamic table (``settings``).
            self.decoder.allowedMaximumSize = 0
        case .ping(let data, ack: false):
            self.output.writeFrame(type: HTTP2Wire.FrameType.ping, flags: HTTP2Wire.Flag.ack, streamID: 0) { $0.writeInteger(data) }
        case .ping(_, ack: true):
            handle(.pingAnswered)
        case .goAway(let lastStreamID, let errorCode, let debugData):
            self.blocked.removeAll { $0 > lastStreamID }
            self.sendBlocked()
            handle(.goAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: debugData))
        case .rstStream(let streamID, let errorCode):
            if !self.blocked.isEmpty, self.blocked.remove(streamID: streamID) { self.sendBlocked() }
            if let answer = self.partial.removeValue(forKey: streamID), answer.status >= 200 {
                // The final status came before the reset: the server decided, and only the body
                // (if it had one) is cut short. Sending it again could deliver it twice.
                handle(.answered(streamID: streamID, status: answer.status, body: answer.body))
            } else {
                handle(.reset(streamID: streamID, refused: errorCode == HTTP2Wire.ErrorCode.refusedStream))
            }
        case .windowUpdate(let streamID, let increment):
            try self.windowUpdate(streamID: streamID, increment: increment)
        case .ignored:
            break
        }
    }

    private mutating func headerBlock(_ block: ByteBuffer, streamID: Int32, endStream: Bool, _ handle: (Event) -> Void) throws(HTTP2ConnectionError) {
        // Decoded whatever the stream: the HPACK state is the connection's.
        let status = try self.decoder.status(of: block)
        // An interim answer (100 Continue, 103 Early Hints; RFC 9110 §15.2): the final one follows.
        if let status, status < 200, !endStream { return }
        if !self.partial.isEmpty, var answer = self.partial[streamID] {
            // Trailers.
            if endStream {
                self.partial.removeValue(forKey: streamID)
                self.answered(streamID: streamID, status: answer.status, body: answer.body, handle)
            } else {
                answer.status = status ?? answer.status
                self.partial[streamID] = answer
            }
        } else if endStream {
            self.answered(streamID: streamID, status: status ?? 0, body: nil, handle)
        } else {
            self.partial[streamID] = (status ?? 0, nil, HTTP2InboundWindow(target: HTTP2InboundWindow.protocolDefault))
        }
    }

    /// A whole answer. If the request's body still waits for send window (the server answered
    /// before reading it, as it may, RFC 9113 §8.1), the rest is not needed: it is dropped and the
    /// stream reset (CANCEL), or a server that gives no more credit would hold every later request.
    private mutating func answered(streamID: Int32, status: Int, body: ByteBuffer?, _ handle: (Event) -> Void) {
        if !self.blocked.isEmpty, self.blocked.remove(streamID: streamID) {
            self.output.writeFrame(type: HTTP2Wire.FrameType.rstStream, flags: 0, streamID: streamID) { $0.writeInteger(HTTP2Wire.ErrorCode.cancel) }
            self.sendBlocked()
        }
        handle(.answered(streamID: streamID, status: status, body: body))
    }

    private mutating func data(_ payload: ByteBuffer, streamID: Int32, flowControlledLength length: Int, endStream: Bool, _ handle: (Event) -> Void) {
        if let increment = self.receiveWindow.received(length) { self.output.writeWindowUpdate(streamID: 0, increment) }
        guard var answer = self.partial[streamID] else { return }
        if payload.readableBytes > 0 {
            if answer.body == nil {
                answer.body = payload
            } else {
                var payload = payload
                answer.body!.writeBuffer(&payload)
            }
        }
        if endStream {
            self.partial.removeValue(forKey: streamID)
            self.answered(streamID: streamID, status: answer.status, body: answer.body, handle)
        } else {
            // A body longer than half a stream window: the stream needs credit of its own.
            if let increment = answer.window.received(length) { self.output.writeWindowUpdate(streamID: streamID, increment) }
            self.partial[streamID] = answer
        }
    }

    /// Applies the server's SETTINGS, acknowledges them, and returns their stream limit, if any.
    private mutating func apply(_ settings: [HTTP2SettingValue]) throws(HTTP2ConnectionError) -> Int? {
        var maxConcurrentStreams: Int?
        for setting in settings {
            guard try !self.blocked.apply(setting) else { continue }
            switch setting.identifier {
            case HTTP2Wire.Setting.headerTableSize: self.encoder.peerAllows(headerTableSize: Int(setting.value))
            case HTTP2Wire.Setting.maxConcurrentStreams: maxConcurrentStreams = Int(setting.value)
            default: break
            }
        }
        self.output.writeFrame(type: HTTP2Wire.FrameType.settings, flags: HTTP2Wire.Flag.ack, streamID: 0) { _ in }
        self.sawSettings = true
        self.sendBlocked()
        return maxConcurrentStreams
    }

    private mutating func windowUpdate(streamID: Int32, increment: Int) throws(HTTP2ConnectionError) {
        if streamID == 0 {
            try self.blocked.grantConnection(increment)
        } else {
            _ = try self.blocked.grant(increment, to: streamID)
        }
        self.sendBlocked()
    }
}
