import APNSWire
import NIOCore
import Testing

/// Frame bytes built by hand, as a server would write them.
enum Frames {
    static func frame(_ type: UInt8, flags: UInt8 = 0, stream: Int32 = 0, _ payload: [UInt8] = []) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF), type, flags]
            + withUnsafeBytes(of: UInt32(bitPattern: stream).bigEndian, Array.init) + payload
    }

    static func uint32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }

    /// Appends `bytes` to `unread` in pieces of `piece` bytes (TLS records of any size), calling
    /// `read` after each piece.
    static func feed(
        _ bytes: [UInt8], piece: Int, to unread: inout ByteBuffer, _ read: (inout ByteBuffer) throws(HTTP2ConnectionError) -> Void
    ) throws(HTTP2ConnectionError) {
        var index = 0
        while index < bytes.count {
            let end = min(bytes.count, index + piece)
            unread.writeBytes(bytes[index..<end])
            index = end
            try read(&unread)
        }
    }

    static func settings(_ values: [(UInt16, UInt32)]) -> [UInt8] {
        Self.frame(0x4, values.flatMap { withUnsafeBytes(of: $0.0.bigEndian, Array.init) + Self.uint32($0.1) })
    }

    /// A client's frames, read back independently of the parser under test.
    struct Written: Equatable {
        var type: UInt8
        var flags: UInt8
        var stream: Int32
        var payload: [UInt8]
    }

    static func split(_ bytes: [UInt8]) -> [Written] {
        var frames: [Written] = []
        var index = 0
        while index + 9 <= bytes.count {
            let length = Int(bytes[index]) << 16 | Int(bytes[index + 1]) << 8 | Int(bytes[index + 2])
            let stream = Int32(bitPattern: UInt32(bytes[index + 5]) << 24 | UInt32(bytes[index + 6]) << 16 | UInt32(bytes[index + 7]) << 8 | UInt32(bytes[index + 8]))
            frames.append(Written(type: bytes[index + 3], flags: bytes[index + 4], stream: stream, payload: Array(bytes[(index + 9)..<(index + 9 + length)])))
            index += 9 + length
        }
        precondition(index == bytes.count, "\(bytes.count - index) bytes after the last whole frame")
        return frames
    }
}

@Suite struct HTTP2FrameParserTests {
    private func parse(_ bytes: [UInt8], maxFrameSize: Int = 16_384) throws(HTTP2ConnectionError) -> [HTTP2InboundFrame] {
        var parser = HTTP2FrameParser(maxFrameSize: maxFrameSize)
        var buffer = ByteBuffer(bytes: bytes)
        var frames: [HTTP2InboundFrame] = []
        while let frame = try parser.next(from: &buffer) { frames.append(frame) }
        #expect(buffer.readableBytes == 0)
        return frames
    }

    private func error(_ bytes: [UInt8]) -> HTTP2ConnectionError? {
        do {
            _ = try self.parse(bytes)
            return nil
        } catch {
            return error
        }
    }

    /// Every frame type a server may send, several in one read.
    static let everyFrame: [UInt8] =
        Frames.settings([(3, 500), (4, 1_000)])
        + Frames.frame(0x4, flags: 0x1)
        + Frames.frame(0x1, flags: 0x4 | 0x1, stream: 1, [0x88])
        + Frames.frame(0x1, flags: 0x0, stream: 3, [0x88])
        + Frames.frame(0x9, flags: 0x4, stream: 3, [0x0F])
        + Frames.frame(0x0, flags: 0x1, stream: 3, Array("{}".utf8))
        + Frames.frame(0x3, stream: 5, Frames.uint32(7))
        + Frames.frame(0x6, Array(1...8))
        + Frames.frame(0x6, flags: 0x1, Array(repeating: 0, count: 8))
        + Frames.frame(0x7, Frames.uint32(9) + Frames.uint32(0) + Array(#"{"reason":"Shutdown"}"#.utf8))
        + Frames.frame(0x8, Frames.uint32(1_000))
        + Frames.frame(0x8, stream: 7, Frames.uint32(0x8000_0010))  // the reserved bit is ignored
        + Frames.frame(0x2, stream: 9, [0, 0, 0, 0, 16])
        + Frames.frame(0xFA, stream: 9, [1, 2, 3])

    static let everyFrameRead: [HTTP2InboundFrame] = [
        .settings([HTTP2SettingValue(3, 500), HTTP2SettingValue(4, 1_000)]),
        .settingsAck,
        .headers(streamID: 1, fragment: ByteBuffer(bytes: [0x88]), endHeaders: true, endStream: true),
        .headers(streamID: 3, fragment: ByteBuffer(bytes: [0x88]), endHeaders: false, endStream: false),
        .continuation(streamID: 3, fragment: ByteBuffer(bytes: [0x0F]), endHeaders: true),
        .data(streamID: 3, payload: ByteBuffer(string: "{}"), flowControlledLength: 2, endStream: true),
        .rstStream(streamID: 5, errorCode: 7),
        .ping(0x0102_0304_0506_0708, ack: false),
        .ping(0, ack: true),
        .goAway(lastStreamID: 9, errorCode: 0, debugData: ByteBuffer(string: #"{"reason":"Shutdown"}"#)),
        .windowUpdate(streamID: 0, increment: 1_000),
        .windowUpdate(streamID: 7, increment: 16),
        .ignored,
        .ignored,
    ]

    @Test func everyFrameTypeIsReadSeveralInOneRead() throws {
        #expect(try self.parse(Self.everyFrame) == Self.everyFrameRead)
    }

    /// The same bytes arriving one at a time, as TLS records split anywhere: nothing is read until
    /// a frame is whole, and nothing is consumed meanwhile.
    @Test func framesSplitAcrossReadsAreReadWhole() throws {
        var parser = HTTP2FrameParser()
        var buffer = ByteBuffer()
        var frames: [HTTP2InboundFrame] = []
        for byte in Self.everyFrame {
            buffer.writeInteger(byte)
            let before = buffer.readableBytes
            if let frame = try parser.next(from: &buffer) {
                frames.append(frame)
                #expect(buffer.readableBytes == 0)
            } else {
                #expect(buffer.readableBytes == before)
            }
        }
        #expect(frames == Self.everyFrameRead)
    }

    @Test func paddingIsRemovedAndStillCountsForFlowControl() throws {
        let data = Frames.frame(0x0, flags: 0x8 | 0x1, stream: 1, [3] + Array("ok".utf8) + [0, 0, 0])
        let headers = Frames.frame(0x1, flags: 0x8 | 0x20 | 0x4, stream: 3, [2] + [0, 0, 0, 1, 16] + [0x88] + [0, 0])
        #expect(try self.parse(data + headers) == [
            .data(streamID: 1, payload: ByteBuffer(string: "ok"), flowControlledLength: 6, endStream: true),
            .headers(streamID: 3, fragment: ByteBuffer(bytes: [0x88]), endHeaders: true, endStream: false),
        ])
    }

    @Test func aFrameLargerThanAllowedIsAFrameSizeError() throws {
        let big = Frames.frame(0x0, stream: 1, Array(repeating: 0, count: 16_385))
        let error = self.error(big)
        #expect(error?.code == HTTP2Wire.ErrorCode.frameSizeError)
        #expect(error?.reason.contains("16385 bytes") == true)
        // Announced in the header: refused before the payload has arrived.
        var parser = HTTP2FrameParser()
        var header = ByteBuffer(bytes: big.prefix(9))
        #expect(throws: HTTP2ConnectionError.self) { try parser.next(from: &header) }
        #expect(try self.parse(big, maxFrameSize: 20_000).count == 1)
    }

    @Test(arguments: [
        (Frames.frame(0x0, stream: 0, [1]), HTTP2Wire.ErrorCode.protocolError, "DATA on stream 0"),
        (Frames.frame(0x1, flags: 0x4, stream: 0, [0x88]), HTTP2Wire.ErrorCode.protocolError, "HEADERS on stream 0"),
        (Frames.frame(0x4, stream: 1, []), HTTP2Wire.ErrorCode.protocolError, "SETTINGS on stream 1"),
        (Frames.frame(0x4, [0, 3, 0, 0]), HTTP2Wire.ErrorCode.frameSizeError, "not a multiple of 6"),
        (Frames.frame(0x4, flags: 0x1, [0, 0, 0, 0, 0, 0]), HTTP2Wire.ErrorCode.frameSizeError, "SETTINGS acknowledgement of 6 bytes"),
        (Frames.frame(0x6, [1, 2, 3]), HTTP2Wire.ErrorCode.frameSizeError, "PING of 3 bytes"),
        (Frames.frame(0x6, stream: 1, Array(repeating: 0, count: 8)), HTTP2Wire.ErrorCode.protocolError, "PING on stream 1"),
        (Frames.frame(0x5, flags: 0x4, stream: 1, [0, 0, 0, 2, 0x88]), HTTP2Wire.ErrorCode.protocolError, "PUSH_PROMISE"),
        (Frames.frame(0x7, [0, 0, 0, 1]), HTTP2Wire.ErrorCode.frameSizeError, "GOAWAY of 4 bytes"),
        (Frames.frame(0x8, Frames.uint32(0)), HTTP2Wire.ErrorCode.protocolError, "WINDOW_UPDATE of 0 bytes"),
        (Frames.frame(0x8, [0, 1]), HTTP2Wire.ErrorCode.frameSizeError, "WINDOW_UPDATE of 2 bytes"),
        (Frames.frame(0x3, stream: 1, [0, 0]), HTTP2Wire.ErrorCode.frameSizeError, "RST_STREAM of 2 bytes"),
        (Frames.frame(0x3, stream: 0, Frames.uint32(1)), HTTP2Wire.ErrorCode.protocolError, "RST_STREAM on stream 0"),
        (Frames.frame(0x2, stream: 1, [0, 0, 0]), HTTP2Wire.ErrorCode.frameSizeError, "PRIORITY of 3 bytes"),
        (Frames.frame(0x0, flags: 0x8, stream: 1, [5, 1, 2]), HTTP2Wire.ErrorCode.protocolError, "padding longer"),
        (Frames.frame(0x1, flags: 0x20 | 0x4, stream: 1, [0, 0]), HTTP2Wire.ErrorCode.frameSizeError, "fewer than 5"),
        (Frames.frame(0x9, flags: 0x4, stream: 1, [0x88]), HTTP2Wire.ErrorCode.protocolError, "follows no HEADERS"),
        (Frames.frame(0x1, stream: 1, [0x88]) + Frames.frame(0x0, stream: 1, [1]), HTTP2Wire.ErrorCode.protocolError, "interrupts stream 1"),
        (Frames.frame(0x1, stream: 1, [0x88]) + Frames.frame(0x9, flags: 0x4, stream: 3, [0x88]), HTTP2Wire.ErrorCode.protocolError, "interrupts stream 1"),
    ])
    func brokenFramesAreConnectionErrors(bytes: [UInt8], code: UInt32, reason: String) {
        let error = self.error(bytes)
        #expect(error?.code == code, "\(String(describing: error))")
        #expect(error?.reason.contains(reason) == true, "\(String(describing: error))")
    }
}
