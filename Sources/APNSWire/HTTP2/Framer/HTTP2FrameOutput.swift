import DequeModule
public import NIOCore

/// The bytes a framer has written and not yet handed out, in one buffer whose storage is reused
/// once its reader has let go of it. Shared by ``HTTP2ClientFramer`` and ``HTTP2ServerFramer``.
struct HTTP2FrameOutput {
    /// Frames written and not yet taken.
    private var output: ByteBuffer?
    /// A taken batch's storage, reused once its reader has let go of it.
    private var spare: ByteBuffer?
    private let allocator: ByteBufferAllocator

    init(allocator: ByteBufferAllocator) {
        self.allocator = allocator
    }

    /// The bytes to write, if any.
    mutating func take() -> ByteBuffer? {
        guard let output = self.output else { return nil }
        self.output = nil
        self.spare = output
        return output
    }

    /// The output buffer, moved out (so that it stays uniquely referenced) to be written and given
    /// back with ``close(_:)``: the batch so far, or the spare storage, or a new buffer.
    mutating func open() -> ByteBuffer {
        if let output = self.output {
            self.output = nil
            return output
        }
        if var spare = self.spare {
            self.spare = nil
            spare.clear()
            return spare
        }
        return self.allocator.buffer(capacity: 16_384)
    }

    /// Gives back the buffer ``open()`` handed out.
    mutating func close(_ output: consuming ByteBuffer) {
        self.output = output
    }

    mutating func write(_ body: (inout ByteBuffer) -> Void) {
        var output = self.open()
        body(&output)
        // `consume`: the local's reference ends here, or the next write would copy the buffer.
        self.close(consume output)
    }

    mutating func writeFrame(type: UInt8, flags: UInt8, streamID: Int32, payload: (inout ByteBuffer) -> Void) {
        self.write { output in
            let start = output.writerIndex
            output.writeRepeatingByte(0, count: HTTP2Wire.frameHeaderLength)
            payload(&output)
            HTTP2Wire.setFrameHeader(at: start, type: type, flags: flags, streamID: streamID, in: &output)
        }
    }

    mutating func writeSettings(_ settings: [HTTP2SettingValue]) {
        self.writeFrame(type: HTTP2Wire.FrameType.settings, flags: 0, streamID: 0) { output in
            for setting in settings {
                output.writeInteger(setting.identifier)
                output.writeInteger(setting.value)
            }
        }
    }

    mutating func writeWindowUpdate(streamID: Int32, _ increment: Int) {
        self.writeFrame(type: HTTP2Wire.FrameType.windowUpdate, flags: 0, streamID: streamID) { $0.writeInteger(UInt32(increment)) }
    }

    mutating func writeGoAway(lastStreamID: Int32, errorCode: UInt32, debugData: ByteBuffer? = nil) {
        self.writeFrame(type: HTTP2Wire.FrameType.goAway, flags: 0, streamID: 0) { output in
            output.writeInteger(UInt32(bitPattern: lastStreamID))
            output.writeInteger(errorCode)
            if var debugData { output.writeBuffer(&debugData) }
        }
    }
}

/// The sending side of a connection's flow control (RFC 9113 §6.9), shared by both framers: the
/// connection's send window, what the peer's SETTINGS say of streams' windows and of frame sizes,
/// and the bodies waiting for window. Each body goes out as DATA, in order, only within the
/// connection's window and its stream's, in frames no larger than the peer allows; the last frame
/// of each ends its stream.
struct HTTP2SendQueue {
    private var waiting: Deque<(streamID: Int32, data: ByteBuffer, window: Int)> = []
    /// Bytes of DATA the connection may still send.
    var connectionWindow = HTTP2InboundWindow.protocolDefault
    /// The peer's `SETTINGS_INITIAL_WINDOW_SIZE`: each new stream's send window.
    private(set) var initialStreamWindow = HTTP2InboundWindow.protocolDefault
    /// The peer's `SETTINGS_MAX_FRAME_SIZE`.
    private(set) var maxFrameSize = HTTP2Wire.defaultMaxFrameSize

    var isEmpty: Bool { self.waiting.isEmpty }
    var count: Int { self.waiting.count }

    mutating func append(streamID: Int32, _ data: ByteBuffer, window: Int) {
        self.waiting.append((streamID, data, window))
    }

    /// Applies one of the peer's settings if it is about sending (`SETTINGS_ENABLE_PUSH` is only
    /// checked); false for any other.
    mutating func apply(_ setting: HTTP2SettingValue) throws(HTTP2ConnectionError) -> Bool {
        let value = Int(setting.value)
        switch setting.identifier {
        case HTTP2Wire.Setting.enablePush:
            guard value <= 1 else { throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "SETTINGS_ENABLE_PUSH \(value)") }
        case HTTP2Wire.Setting.initialWindowSize:
            guard value <= HTTP2Wire.maxWindow else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE \(value), above 2^31-1")
            }
            let delta = value - self.initialStreamWindow
            self.initialStreamWindow = value
            for index in self.waiting.indices {
                self.waiting[index].window += delta
                try Self.checkWindow(self.waiting[index].window, of: self.waiting[index].streamID)
            }
        case HTTP2Wire.Setting.maxFrameSize:
            guard value >= HTTP2Wire.defaultMaxFrameSize, value < 1 << 24 else {
                throw HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "SETTINGS_MAX_FRAME_SIZE \(value), outside 16,384 to 16,777,215")
            }
            self.maxFrameSize = value
        default:
            return false
        }
        return true
    }

    /// WINDOW_UPDATE on the connection.
    mutating func grantConnection(_ increment: Int) throws(HTTP2ConnectionError) {
        self.connectionWindow += increment
        try Self.checkWindow(self.connectionWindow, of: 0)
    }

    /// Writes as much as the windows allow into `output`, and calls `ended` for each body written
    /// whole.
    mutating func send(into output: inout HTTP2FrameOutput, ended: (Int32) -> Void = { _ in }) {
        while var first = self.waiting.first {
            let length = min(first.data.readableBytes, self.connectionWindow, first.window, self.maxFrameSize)
            guard length > 0 || first.data.readableBytes == 0 else { return }
            let piece = first.data.readSlice(length: length)!
            self.connectionWindow -= length
            first.window -= length
            let last = first.data.readableBytes == 0
            output.write { output in
                HTTP2Wire.writeFrameHeader(
                    length: length, type: HTTP2Wire.FrameType.data, flags: last ? HTTP2Wire.Flag.endStream : 0, streamID: first.streamID, to: &output
                )
                output.writeImmutableBuffer(piece)
            }
            if last {
                self.waiting.removeFirst()
                ended(first.streamID)
            } else {
                self.waiting[self.waiting.startIndex] = first
            }
        }
    }

    mutating func removeAll(where predicate: (Int32) -> Bool) {
        self.waiting.removeAll { predicate($0.streamID) }
    }

    /// Drops the body of `streamID` if it waits. - Returns: whether it did.
    mutating func remove(streamID: Int32) -> Bool {
        guard let index = self.waiting.firstIndex(where: { $0.streamID == streamID }) else { return false }
        self.waiting.remove(at: index)
        return true
    }

    /// WINDOW_UPDATE for a stream: false when no body of it waits.
    mutating func grant(_ increment: Int, to streamID: Int32) throws(HTTP2ConnectionError) -> Bool {
        guard let index = self.waiting.firstIndex(where: { $0.streamID == streamID }) else { return false }
        self.waiting[index].window += increment
        try Self.checkWindow(self.waiting[index].window, of: streamID)
        return true
    }

    /// A window above 2³¹ − 1 is a FLOW_CONTROL_ERROR.
    static func checkWindow(_ window: Int, of streamID: Int32) throws(HTTP2ConnectionError) {
        guard window <= HTTP2Wire.maxWindow else {
            throw HTTP2ConnectionError(
                code: HTTP2Wire.ErrorCode.flowControlError,
                streamID == 0 ? "the connection's send window above 2^31-1" : "stream \(streamID)'s send window above 2^31-1"
            )
        }
    }
}
