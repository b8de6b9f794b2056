import APNSWire
import NIOCore
import NIOHPACK
import Testing

/// The server framer against a client played by hand: frames built byte by byte, requests' header
/// blocks by NIOHPACK's encoder, answers' read back by NIOHPACK's decoder.
@Suite struct HTTP2ServerFramerTests {
    static let settings = [
        HTTP2SettingValue(HTTP2Wire.Setting.maxConcurrentStreams, 1),
        HTTP2SettingValue(HTTP2Wire.Setting.initialWindowSize, 65_535),
        HTTP2SettingValue(HTTP2Wire.Setting.maxFrameSize, 16_384),
    ]

    /// One connection's two ends.
    struct Connection {
        var framer = HTTP2ServerFramer(settings: HTTP2ServerFramerTests.settings)
        var clientEncoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var clientDecoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var events: [String] = []
        var unread = ByteBuffer()

        /// Feeds `bytes` to the framer in pieces of `piece` bytes (TLS records of any size).
        mutating func read(_ bytes: [UInt8], piece: Int = .max) throws(HTTP2ConnectionError) {
            var framer = self.framer
            var unread = self.unread
            defer { (self.framer, self.unread) = (framer, unread) }
            try Frames.feed(bytes, piece: piece, to: &unread) { (unread: inout ByteBuffer) throws(HTTP2ConnectionError) in
                var events: [String] = []
                try framer.read(&unread) { event in
                    switch event {
                    case .headers(let stream, let fields, let endStream):
                        events.append("headers \(stream) \(fields.map { "\($0.name)=\($0.value)" }.joined(separator: " "))\(endStream ? " end" : "")")
                    case .data(let stream, let payload, let flowControlled, let endStream):
                        events.append("data \(stream) \(payload.readableBytes)/\(flowControlled)\(endStream ? " end" : "")")
                    case .reset(let stream): events.append("reset \(stream)")
                    case .ping: events.append("ping")
                    case .pingAnswered: events.append("pong")
                    case .goAway(let last, let code): events.append("goaway \(last) \(code)")
                    }
                }
                self.events += events
            }
        }

        mutating func written() -> [Frames.Written] {
            guard var bytes = self.framer.take() else { return [] }
            return Frames.split(bytes.readBytes(length: bytes.readableBytes)!)
        }

        /// A HEADERS frame of `fields` (a request by default).
        mutating func headers(
            stream: Int32, _ fields: [(String, String)] = Connection.request, endStream: Bool = false, endHeaders: Bool = true
        ) throws -> [UInt8] {
            try self.clientEncoder.beginEncoding(allocator: ByteBufferAllocator())
            try self.clientEncoder.append(headers: fields)
            var block = try self.clientEncoder.endEncoding()
            return Frames.frame(0x1, flags: (endHeaders ? 0x4 : 0) | (endStream ? 0x1 : 0), stream: stream, block.readBytes(length: block.readableBytes)!)
        }

        static let request = [
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/abcd"), (":authority", "api.push.apple.com"),
            ("apns-topic", "com.example.app"),
        ]

        /// The answer HEADERS of `frame`, decoded.
        mutating func decode(_ frame: Frames.Written) throws -> [String] {
            var block = ByteBuffer(bytes: frame.payload)
            return try self.clientDecoder.decodeHeaders(from: &block).map { "\($0.name)=\($0.value)" }
        }

        /// A connection past the preface and both SETTINGS.
        static func started(settings: [(UInt16, UInt32)] = []) throws -> Connection {
            var connection = Connection()
            connection.framer.start()
            _ = connection.written()
            try connection.read(HTTP2Wire.preface + Frames.settings(settings) + Frames.frame(0x4, flags: 0x1))
            _ = connection.written()
            return connection
        }
    }

    private static func connectionError(_ body: () throws -> Void) -> HTTP2ConnectionError? {
        do {
            try body()
            return nil
        } catch {
            return error as? HTTP2ConnectionError
        }
    }

    @Test func theConnectionOpensWithSettingsAndAcknowledgesTheClients() throws {
        var connection = Connection()
        connection.framer.start()
        let opening = connection.written()
        #expect(opening.map(\.type) == [0x4])
        #expect(opening[0].payload == Frames.settings([(3, 1), (4, 65_535), (5, 16_384)]).dropFirst(9).map { $0 })
        // The preface and SETTINGS a byte at a time.
        try connection.read(HTTP2Wire.preface + Frames.settings([(4, 1_000)]), piece: 1)
        #expect(connection.written() == [Frames.Written(type: 0x4, flags: 0x1, stream: 0, payload: [])])
    }

    @Test func aWrongPrefaceOrAFirstFrameOtherThanSettingsEndsTheConnection() {
        var wrong = Connection()
        #expect(Self.connectionError { try wrong.read(Array("GET / HTTP/1.1\r\n".utf8)) }?.code == HTTP2Wire.ErrorCode.protocolError)
        var early = Connection()
        #expect(Self.connectionError { try early.read(HTTP2Wire.preface + Frames.frame(0x6, [UInt8](repeating: 0, count: 8))) }?.code == HTTP2Wire.ErrorCode.protocolError)
    }

    @Test(arguments: [1, 7, Int.max])
    func aRequestIsReadWhateverTheReadsSizeAndAnswered(piece: Int) throws {
        var connection = try Connection.started()
        let request = try connection.headers(stream: 1) + Frames.frame(0x0, flags: 0x1, stream: 1, Array("{}".utf8))
        try connection.read(request, piece: piece)
        #expect(connection.events == [
            "headers 1 :method=POST :scheme=https :path=/3/device/abcd :authority=api.push.apple.com apns-topic=com.example.app",
            "data 1 2/2 end",
        ])
        connection.framer.writeAnswer(streamID: 1, status: 200, apnsID: "A-B", body: nil)
        let answer = connection.written()
        #expect(answer.map(\.type) == [0x1])
        #expect(answer[0].flags == 0x4 | 0x1)
        #expect(try connection.decode(answer[0]) == [":status=200", "apns-id=A-B"])
        // The stream is closed: another answer on it writes nothing.
        connection.framer.writeAnswer(streamID: 1, status: 200, apnsID: "A-B", body: nil)
        #expect(connection.written().isEmpty)
    }

    /// 400 is in HPACK's static table, the others are written as literals.
    @Test(arguments: [410, 400, 429, 503])
    func aRejectionIsHeadersThenItsBody(status: Int) throws {
        var connection = try Connection.started()
        try connection.read(try connection.headers(stream: 1, endStream: true))
        connection.framer.writeAnswer(streamID: 1, status: status, apnsID: "X", body: ByteBuffer(string: #"{"reason":"Unregistered"}"#))
        let frames = connection.written()
        #expect(frames.map(\.type) == [0x1, 0x0])
        #expect(frames[0].flags == 0x4)
        #expect(try connection.decode(frames[0]) == [":status=\(status)", "apns-id=X", "content-type=application/json"])
        #expect(frames[1].flags == 0x1)
        #expect(String(decoding: frames[1].payload, as: UTF8.self) == #"{"reason":"Unregistered"}"#)
    }

    @Test func answerBodiesWaitForTheConnectionWindowInOrder() throws {
        var connection = try Connection.started()
        let body = ByteBuffer(repeating: 0x61, count: 15_000)
        for stream in [1, 3, 5, 7, 9] as [Int32] {
            try connection.read(try connection.headers(stream: stream, endStream: true))
            connection.framer.writeAnswer(streamID: stream, status: 400, apnsID: "X", body: body)
        }
        // 65,535 bytes: four bodies whole and 5,535 bytes of the fifth.
        var frames = connection.written().filter { $0.type == 0x0 }
        #expect(frames.map(\.stream) == [1, 3, 5, 7, 9])
        #expect(frames.map(\.payload.count) == [15_000, 15_000, 15_000, 15_000, 5_535])
        #expect(frames.map(\.flags) == [0x1, 0x1, 0x1, 0x1, 0x0])
        try connection.read(Frames.frame(0x8, stream: 0, Frames.uint32(100_000)))
        frames = connection.written()
        #expect(frames.map(\.stream) == [9])
        #expect(frames.map(\.payload.count) == [9_465])
        #expect(frames.map(\.flags) == [0x1])
    }

    @Test func aBodyLargerThanTheFrameSizeIsSplit() throws {
        var connection = try Connection.started()
        try connection.read(try connection.headers(stream: 1, endStream: true))
        connection.framer.writeAnswer(streamID: 1, status: 400, apnsID: "X", body: ByteBuffer(repeating: 0x61, count: 20_000))
        let frames = connection.written().filter { $0.type == 0x0 }
        #expect(frames.map(\.payload.count) == [16_384, 3_616])
        #expect(frames.map(\.flags) == [0x0, 0x1])
    }

    @Test func aStreamWindowOfZeroHoldsItsBodyUntilWindowUpdate() throws {
        var connection = try Connection.started(settings: [(4, 0)])
        try connection.read(try connection.headers(stream: 1, endStream: true))
        connection.framer.writeAnswer(streamID: 1, status: 410, apnsID: "X", body: ByteBuffer(string: "{}"))
        #expect(connection.written().map(\.type) == [0x1])
        try connection.read(Frames.frame(0x8, stream: 1, Frames.uint32(1)))
        #expect(connection.written().map(\.payload.count) == [1])
        // SETTINGS raising the initial window moves the waiting stream's too.
        try connection.read(Frames.settings([(4, 10)]))
        let frames = connection.written()
        #expect(frames.map(\.type) == [0x4, 0x0])
        #expect(frames[1].payload == Array("}".utf8))
        #expect(frames[1].flags == 0x1)
    }

    @Test func dataBeyondTheGrantedConnectionWindowIsAFlowControlError() throws {
        var connection = try Connection.started()
        try connection.read(try connection.headers(stream: 1))
        let chunk = [UInt8](repeating: 0, count: 16_384)
        for _ in 0..<3 { try connection.read(Frames.frame(0x0, stream: 1, chunk)) }
        // 49,152 of 65,535 used; the stream's window is the same 65,535.
        connection.framer.windowUpdate(49_152)
        try connection.read(try connection.headers(stream: 3))
        for _ in 0..<3 { try connection.read(Frames.frame(0x0, stream: 3, chunk)) }
        #expect(
            Self.connectionError { try connection.read(Frames.frame(0x0, stream: 3, chunk) + Frames.frame(0x0, stream: 3, chunk)) }?.code
                == HTTP2Wire.ErrorCode.flowControlError
        )
    }

    @Test func aStreamsWindowOverrunResetsOnlyThatStream() throws {
        var connection = try Connection.started()
        connection.framer.windowUpdate(1 << 20)
        try connection.read(try connection.headers(stream: 1))
        let chunk = [UInt8](repeating: 0, count: 16_384)
        // 49,152 of the stream's 65,535; the next 16,384 overrun it by one byte.
        for _ in 0..<3 { try connection.read(Frames.frame(0x0, stream: 1, chunk)) }
        _ = connection.written()
        connection.events.removeAll()
        try connection.read(Frames.frame(0x0, stream: 1, chunk))
        #expect(connection.events == ["reset 1", "data 1 0/16384"])
        #expect(connection.written() == [Frames.Written(type: 0x3, flags: 0, stream: 1, payload: Frames.uint32(3))])
    }

    @Test func streamRulesBrokenAreConnectionErrors() throws {
        var even = try Connection.started()
        #expect(Self.connectionError { try even.read(try even.headers(stream: 2)) }?.code == HTTP2Wire.ErrorCode.protocolError)
        var idle = try Connection.started()
        #expect(Self.connectionError { try idle.read(Frames.frame(0x0, stream: 1, [1])) }?.code == HTTP2Wire.ErrorCode.protocolError)
        var closed = try Connection.started()
        try closed.read(try closed.headers(stream: 3, endStream: true))
        closed.framer.writeAnswer(streamID: 3, status: 200, apnsID: "X", body: nil)
        // Stream 1 was skipped: it is closed too.
        #expect(Self.connectionError { try closed.read(try closed.headers(stream: 1)) }?.code == HTTP2Wire.ErrorCode.streamClosed)
        #expect(Self.connectionError { try closed.read(try closed.headers(stream: 3)) }?.code == HTTP2Wire.ErrorCode.streamClosed)
    }

    @Test func dataAfterEndStreamResetsTheStreamAndDataOnAClosedOneIsIgnored() throws {
        var connection = try Connection.started()
        try connection.read(try connection.headers(stream: 1, endStream: true))
        try connection.read(try connection.headers(stream: 3))
        _ = connection.written()
        connection.events.removeAll()
        try connection.read(Frames.frame(0x0, stream: 1, [1, 2]))
        #expect(connection.events == ["reset 1", "data 1 0/2"])
        #expect(connection.written() == [Frames.Written(type: 0x3, flags: 0, stream: 1, payload: Frames.uint32(5))])
        // Refused by the owner, the client's DATA still in flight: counted, not an error.
        connection.framer.reset(streamID: 3, errorCode: HTTP2Wire.ErrorCode.refusedStream)
        connection.events.removeAll()
        try connection.read(Frames.frame(0x0, flags: 0x1, stream: 3, [1, 2, 3]))
        #expect(connection.events == ["data 3 0/3"])
    }

    @Test(arguments: [
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), ("Apns-Topic", "x")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), ("connection", "close")],
        [(":method", "POST"), (":scheme", "https"), ("apns-topic", "x"), (":path", "/")],
        [(":method", "POST"), (":scheme", "https")],
        [(":method", "POST"), (":method", "POST"), (":scheme", "https"), (":path", "/")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), (":status", "200")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), ("te", "gzip")],
        [(":method", "POST"), (":scheme", "https"), (":path", "/"), ("x", "a\nb")],
    ] as [[(String, String)]])
    func aMalformedRequestIsResetWithAProtocolErrorAndNeverReported(_ fields: [(String, String)]) throws {
        var connection = try Connection.started()
        try connection.read(try connection.headers(stream: 1, fields, endStream: true))
        #expect(connection.events.isEmpty)
        #expect(connection.written() == [Frames.Written(type: 0x3, flags: 0, stream: 1, payload: Frames.uint32(1))])
        // The HPACK state stayed right: the next request decodes. (Static-table names only:
        // NIOHPACK's encoder would name `apns-topic` by a dynamic entry `Apns-Topic`.)
        try connection.read(try connection.headers(stream: 3, [(":method", "POST"), (":scheme", "https"), (":path", "/x")], endStream: true))
        #expect(connection.events.count == 1)
    }

    @Test func aHeaderBlockInContinuationsAndTrailersAreRead() throws {
        var connection = try Connection.started()
        var whole = try connection.headers(stream: 1)
        let block = Array(whole.dropFirst(9))
        whole = Frames.frame(0x1, stream: 1, Array(block.prefix(5))) + Frames.frame(0x9, stream: 1, Array(block.dropFirst(5).prefix(3)))
            + Frames.frame(0x9, flags: 0x4, stream: 1, Array(block.dropFirst(8)))
        try connection.read(whole)
        try connection.read(try connection.headers(stream: 1, [("x-trailer", "1")], endStream: true))
        #expect(connection.events.count == 2)
        #expect(connection.events.last == "headers 1 x-trailer=1 end")
    }

    @Test func pingIsAcknowledgedAndResetsAndGoAwayAreReported() throws {
        var connection = try Connection.started()
        try connection.read(Frames.frame(0x6, stream: 0, [1, 2, 3, 4, 5, 6, 7, 8]))
        #expect(connection.written() == [Frames.Written(type: 0x6, flags: 0x1, stream: 0, payload: [1, 2, 3, 4, 5, 6, 7, 8])])
        try connection.read(try connection.headers(stream: 1, endStream: true))
        try connection.read(Frames.frame(0x3, stream: 1, Frames.uint32(8)))
        connection.framer.writeAnswer(streamID: 1, status: 200, apnsID: "X", body: nil)
        #expect(connection.written().isEmpty, "an answer on a stream the client reset")
        try connection.read(Frames.frame(0x7, stream: 0, Frames.uint32(0) + Frames.uint32(0)))
        #expect(connection.events.map { $0.split(separator: " ")[0] } == ["ping", "headers", "reset", "goaway"])
    }

    @Test func aLowerHeaderTableSizeIsSignalledAtTheNextAnswer() throws {
        var connection = try Connection.started(settings: [(1, 0)])
        connection.clientDecoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 0)
        try connection.read(try connection.headers(stream: 1, endStream: true))
        try connection.read(try connection.headers(stream: 3, endStream: true))
        connection.framer.writeAnswer(streamID: 1, status: 200, apnsID: "X", body: nil)
        connection.framer.writeAnswer(streamID: 3, status: 200, apnsID: "Y", body: nil)
        let frames = connection.written()
        #expect(frames.map { $0.payload.first } == [0x20, 0x88])
        #expect(try frames.map { try connection.decode($0) } == [[":status=200", "apns-id=X"], [":status=200", "apns-id=Y"]])
    }

    @Test func goAwayAndStreamLimitAreWritten() throws {
        var connection = try Connection.started()
        connection.framer.announce(maxConcurrentStreams: 1_000)
        connection.framer.goAway(lastStreamID: 7, errorCode: 0, debugData: ByteBuffer(string: "{}"))
        #expect(connection.written() == [
            Frames.Written(type: 0x4, flags: 0, stream: 0, payload: Array(Frames.settings([(3, 1_000)]).dropFirst(9))),
            Frames.Written(type: 0x7, flags: 0, stream: 0, payload: Frames.uint32(7) + Frames.uint32(0) + Array("{}".utf8)),
        ])
    }
}
