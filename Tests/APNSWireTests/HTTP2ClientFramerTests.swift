import APNSWire
import NIOCore
import NIOHPACK
import PushFleetCore
import Testing

/// The client framer against a server played by hand: frames built byte by byte, answers' header
/// blocks by NIOHPACK's encoder, requests' read back by NIOHPACK's decoder.
@Suite struct HTTP2ClientFramerTests {
    /// One connection's two ends.
    struct Connection {
        var framer = HTTP2ClientFramer(authority: "api.push.apple.com", receiveWindow: 1 << 20)
        var serverEncoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var serverDecoder = HPACKDecoder(allocator: ByteBufferAllocator())
        var events: [String] = []
        /// Bytes the server wrote and the framer has not read whole yet.
        var unread = ByteBuffer()

        /// Feeds `bytes` to the framer, split in pieces of `piece` bytes (TLS records of any size).
        mutating func read(_ bytes: [UInt8], piece: Int = .max) throws(HTTP2ConnectionError) {
            var framer = self.framer
            var unread = self.unread
            defer { (self.framer, self.unread) = (framer, unread) }
            try Frames.feed(bytes, piece: piece, to: &unread) { (unread: inout ByteBuffer) throws(HTTP2ConnectionError) in
                var events: [String] = []
                try framer.read(&unread) { event in
                    switch event {
                    case .settings(let limit): events.append("settings \(limit.map(String.init) ?? "none")")
                    case .answered(let stream, let status, let body):
                        events.append("answered \(stream) \(status)" + (body.map { " " + String(buffer: $0) } ?? ""))
                    case .reset(let stream, let refused): events.append("reset \(stream)\(refused ? " refused" : "")")
                    case .goAway(let last, let code, let debug): events.append("goaway \(last) \(code) \(String(buffer: debug))")
                    case .pingAnswered: events.append("pong")
                    }
                }
                self.events += events
            }
        }

        /// The frames the framer wrote since the last call.
        mutating func written() -> [Frames.Written] {
            guard var bytes = self.framer.take() else { return [] }
            var all = bytes.readBytes(length: bytes.readableBytes)!
            if all.starts(with: HTTP2Wire.preface) { all.removeFirst(HTTP2Wire.preface.count) }
            return Frames.split(all)
        }

        mutating func answer(stream: Int32, _ headers: [(String, String)], endStream: Bool = true) throws -> [UInt8] {
            try self.serverEncoder.beginEncoding(allocator: ByteBufferAllocator())
            try self.serverEncoder.append(headers: headers)
            var block = try self.serverEncoder.endEncoding()
            return Frames.frame(0x1, flags: 0x4 | (endStream ? 0x1 : 0), stream: stream, block.readBytes(length: block.readableBytes)!)
        }

        /// A started connection that has read the server's SETTINGS.
        static func started(settings: [(UInt16, UInt32)] = [(3, 1_000)]) throws -> Connection {
            var connection = Connection()
            connection.framer.start()
            _ = connection.written()
            try connection.read(Frames.settings(settings) + Frames.frame(0x4, flags: 0x1))
            _ = connection.written()
            connection.events.removeAll()
            return connection
        }
    }

    static let token = try! DeviceToken(hex: String(repeating: "ab", count: 32))
    static func notification(payload: Int = 40) -> HTTP2Notification {
        let template = HTTP2NotificationTemplate(topic: "com.example.app", payload: ByteBuffer(string: String(repeating: "x", count: payload)))
        return HTTP2Notification(token: Self.token, template: template)
    }

    @Test func theConnectionOpensWithThePrefaceSettingsAndCredit() {
        var framer = HTTP2ClientFramer(authority: "a", receiveWindow: 1 << 20)
        framer.start()
        var bytes = framer.take()!
        #expect(bytes.readBytes(length: HTTP2Wire.preface.count) == HTTP2Wire.preface)
        let frames = Frames.split(bytes.readBytes(length: bytes.readableBytes)!)
        #expect(frames.map(\.type) == [0x4, 0x8])
        // ENABLE_PUSH 0, MAX_CONCURRENT_STREAMS 0, HEADER_TABLE_SIZE 0, MAX_HEADER_LIST_SIZE 65,536.
        #expect(frames[0].payload == [0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 6, 0, 1, 0, 0])
        #expect(frames[1] == Frames.Written(type: 0x8, flags: 0, stream: 0, payload: Frames.uint32(UInt32((1 << 20) - 65_535))))
    }

    @Test func theServersSettingsAreAcknowledgedAndReported() throws {
        var connection = Connection()
        connection.framer.start()
        _ = connection.written()
        try connection.read(Frames.settings([(3, 500), (4, 100), (5, 32_768), (1, 1_024)]))
        #expect(connection.events == ["settings 500"])
        #expect(connection.written() == [Frames.Written(type: 0x4, flags: 0x1, stream: 0, payload: [])])
        #expect(connection.framer.initialStreamWindow == 100)
        #expect(connection.framer.peerMaxFrameSize == 32_768)
        try connection.read(Frames.settings([(4, 200)]))
        #expect(connection.events.last == "settings none")
    }

    @Test(arguments: [
        ([(4, UInt32(1) << 31)], HTTP2Wire.ErrorCode.flowControlError),
        ([(5, 100)], HTTP2Wire.ErrorCode.protocolError),
        ([(5, 1 << 24)], HTTP2Wire.ErrorCode.protocolError),
        ([(2, 2)], HTTP2Wire.ErrorCode.protocolError),
    ] as [([(UInt16, UInt32)], UInt32)])
    func settingsOutOfRangeAreConnectionErrors(settings: [(UInt16, UInt32)], code: UInt32) {
        var connection = Connection()
        do {
            try connection.read(Frames.settings(settings))
            Issue.record("no error for \(settings)")
        } catch {
            #expect(error.code == code, "\(error)")
        }
    }

    @Test func anythingBeforeTheServersSettingsIsAProtocolError() throws {
        var connection = Connection()
        #expect(throws: HTTP2ConnectionError.self) { try connection.read(Frames.frame(0x6, Array(repeating: 0, count: 8))) }
    }

    @Test func aRequestIsHeadersThenDataEndingTheStream() throws {
        var connection = try Connection.started()
        let notification = Self.notification()
        connection.framer.writeRequest(streamID: 1, notification: notification, authorization: "t.o.k")
        connection.framer.writeRequest(streamID: 3, notification: notification, authorization: "t.o.k")
        let frames = connection.written()
        #expect(frames.map(\.type) == [0x1, 0x0, 0x1, 0x0])
        #expect(frames.map(\.stream) == [1, 1, 3, 3])
        #expect(frames.map(\.flags) == [0x4, 0x1, 0x4, 0x1])
        #expect(frames[1].payload == Array(String(repeating: "x", count: 40).utf8))
        for headers in [frames[0], frames[2]] {
            var block = ByteBuffer(bytes: headers.payload)
            let decoded = try connection.serverDecoder.decodeHeaders(from: &block)
            #expect(decoded[":path"] == ["/3/device/" + String(repeating: "ab", count: 32)])
            #expect(decoded[":method"] == ["POST"] && decoded[":scheme"] == ["https"] && decoded[":authority"] == ["api.push.apple.com"])
            #expect(decoded["apns-topic"] == ["com.example.app"] && decoded["content-length"] == ["40"])
            #expect(decoded["authorization"] == ["bearer t.o.k"])
        }
        #expect(frames[2].payload.count < 100)
        #expect(connection.framer.sendWindow == 65_535 - 80)
    }

    /// A personalized campaign's requests share the template's header block, without
    /// `content-length`, and each carries its own body.
    @Test func eachRecipientsBodyGoesWithItsOwnRequest() throws {
        var connection = try Connection.started()
        let template = HTTP2NotificationTemplate.perRecipient(topic: "com.example.app")
        #expect(template.isPerRecipient && template.payload.readableBytes == 0)
        let bodies = [#"{"aps":{"alert":"Hi Ann"}}"#, #"{"aps":{"alert":"Hi Bartholomew"}}"#]
        for (offset, body) in bodies.enumerated() {
            let notification = HTTP2Notification(token: Self.token, template: template, body: ByteBuffer(string: body))
            connection.framer.writeRequest(streamID: Int32(2 * offset + 1), notification: notification, authorization: nil)
        }
        let frames = connection.written()
        #expect(frames.map(\.type) == [0x1, 0x0, 0x1, 0x0])
        #expect(frames[1].payload == Array(bodies[0].utf8) && frames[3].payload == Array(bodies[1].utf8))
        #expect(frames[2].payload.count < 100, "the second block names the shared fields by index")
        for headers in [frames[0], frames[2]] {
            var block = ByteBuffer(bytes: headers.payload)
            let decoded = try connection.serverDecoder.decodeHeaders(from: &block)
            #expect(decoded["apns-topic"] == ["com.example.app"] && decoded["content-length"] == [])
        }
        #expect(connection.framer.sendWindow == 65_535 - bodies.reduce(0) { $0 + $1.utf8.count })
    }

    @Test func aHeaderBlockLargerThanAFrameGoesOnInContinuationFrames() throws {
        var connection = try Connection.started()
        connection.serverDecoder.maxHeaderListSize = 1 << 20
        let template = HTTP2NotificationTemplate(topic: String(repeating: "t", count: 40_000), payload: ByteBuffer(string: "{}"))
        connection.framer.writeRequest(streamID: 1, notification: HTTP2Notification(token: Self.token, template: template), authorization: nil)
        let frames = connection.written()
        #expect(frames.map(\.type) == [0x1, 0x9, 0x9, 0x0])
        #expect(frames.map(\.flags) == [0x0, 0x0, 0x4, 0x1])
        #expect(frames.prefix(2).allSatisfy { $0.payload.count == 16_384 })
        var block = ByteBuffer(bytes: frames.prefix(3).flatMap(\.payload))
        #expect(try connection.serverDecoder.decodeHeaders(from: &block)["apns-topic"] == [String(repeating: "t", count: 40_000)])
    }

    /// A body goes only within the stream's and the connection's send windows; the rest waits,
    /// and no request is taken meanwhile, until WINDOW_UPDATE or SETTINGS give credit.
    @Test func bodiesWaitForSendWindowInStreamOrder() throws {
        var connection = try Connection.started(settings: [(3, 1_000), (4, 30)])
        connection.framer.writeRequest(streamID: 1, notification: Self.notification(payload: 100), authorization: nil)
        var frames = connection.written()
        #expect(frames.map(\.type) == [0x1, 0x0])
        #expect(frames[1].payload.count == 30 && frames[1].flags == 0)
        #expect(!connection.framer.acceptsRequests)
        // A second request queued behind the first anyway (the core asks first; the framer keeps order).
        connection.framer.writeRequest(streamID: 3, notification: Self.notification(payload: 20), authorization: nil)
        #expect(connection.written().map(\.type) == [0x1])
        try connection.read(Frames.frame(0x8, stream: 1, Frames.uint32(50)))
        frames = connection.written()
        #expect(frames.map(\.stream) == [1])
        #expect(frames[0].payload.count == 50 && frames[0].flags == 0)
        // SETTINGS raise every waiting stream's window by the difference.
        try connection.read(Frames.settings([(4, 100)]))
        frames = connection.written()
        #expect(frames.map(\.type) == [0x4, 0x0, 0x0])
        #expect(frames[1].stream == 1 && frames[1].payload.count == 20 && frames[1].flags == 0x1)
        #expect(frames[2].stream == 3 && frames[2].payload.count == 20 && frames[2].flags == 0x1)
        #expect(connection.framer.acceptsRequests)
        #expect(connection.framer.sendWindow == 65_535 - 120)
    }

    @Test func theConnectionsSendWindowRunsOutAndIsRefunded() throws {
        var connection = try Connection.started()
        var stream: Int32 = 1
        while connection.framer.acceptsRequests {
            connection.framer.writeRequest(streamID: stream, notification: Self.notification(payload: 4_000), authorization: nil)
            stream += 2
        }
        let frames = connection.written()
        let sent = frames.filter { $0.type == 0x0 }.reduce(0) { $0 + $1.payload.count }
        #expect(sent == 65_535)
        #expect(connection.framer.blockedRequests == 1)
        try connection.read(Frames.frame(0x8, Frames.uint32(10_000)))
        let rest = connection.written()
        #expect(rest.map(\.type) == [0x0] && rest[0].flags == 0x1 && rest[0].payload.count == 4_000 - 65_535 % 4_000)
        #expect(connection.framer.acceptsRequests)
        #expect(throws: HTTP2ConnectionError.self) { try connection.read(Frames.frame(0x8, Frames.uint32(0x7FFF_FFFF))) }
    }

    @Test func answersAreReadWhateverTheirShapeAndHowTheyAreCut() throws {
        for piece in [1, 7, 100, Int.max] {
            var connection = try Connection.started()
            var bytes = try connection.answer(stream: 1, [(":status", "200"), ("apns-id", "A")])
            bytes += try connection.answer(stream: 3, [(":status", "400"), ("apns-id", "B")], endStream: false)
            bytes += Frames.frame(0x0, flags: 0x1, stream: 3, Array(#"{"reason":"BadDeviceToken"}"#.utf8))
            // A block in HEADERS and CONTINUATION, a body in two DATA frames, then trailers.
            let block = try connection.answer(stream: 5, [(":status", "410"), ("apns-id", "C")], endStream: false).dropFirst(9)
            bytes += Frames.frame(0x1, stream: 5, Array(block.prefix(2))) + Frames.frame(0x9, flags: 0x4, stream: 5, Array(block.dropFirst(2)))
            bytes += Frames.frame(0x0, stream: 5, Array(#"{"reason":"#.utf8)) + Frames.frame(0x0, stream: 5, Array(#""Unregistered"}"#.utf8))
            bytes += try connection.answer(stream: 5, [("x-trailer", "1")])
            try connection.read(bytes, piece: piece)
            #expect(connection.events == [
                "answered 1 200", #"answered 3 400 {"reason":"BadDeviceToken"}"#, #"answered 5 410 {"reason":"Unregistered"}"#,
            ], "pieces of \(piece)")
        }
    }

    /// Rejection bodies use the receive window up; credit goes back as they are read, so any
    /// number of rejections on one connection never stalls it.
    @Test func rejectionBodiesGiveCreditBack() throws {
        var connection = try Connection.started()
        var returned = 0
        let body = Array(#"{"reason":"BadDeviceToken"}"#.utf8)
        for index in 0..<50_000 {
            let stream = Int32(2 * index + 1)
            try connection.read(try connection.answer(stream: stream, [(":status", "400")], endStream: false) + Frames.frame(0x0, flags: 0x1, stream: stream, body))
            for frame in connection.written() where frame.type == 0x8 {
                #expect(frame.stream == 0)
                returned += Int(frame.payload.reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
            }
        }
        #expect(connection.events.count == 50_000)
        let received = 50_000 * body.count
        #expect(received - returned >= 0 && received - returned < (1 << 20) / 2)
    }

    @Test func pingsGoAwayAndResetsAreHandled() throws {
        var connection = try Connection.started()
        try connection.read(Frames.frame(0x6, Array(1...8)))
        #expect(connection.written() == [Frames.Written(type: 0x6, flags: 0x1, stream: 0, payload: Array(1...8))])
        connection.framer.ping()
        #expect(connection.written() == [Frames.Written(type: 0x6, flags: 0, stream: 0, payload: Array(repeating: 0, count: 8))])
        try connection.read(Frames.frame(0x6, flags: 0x1, Array(repeating: 0, count: 8)))
        try connection.read(Frames.frame(0x3, stream: 3, Frames.uint32(7)) + Frames.frame(0x3, stream: 5, Frames.uint32(2)))
        try connection.read(Frames.frame(0x7, Frames.uint32(9) + Frames.uint32(0) + Array(#"{"reason":"Shutdown"}"#.utf8)))
        #expect(connection.events == ["pong", "reset 3 refused", "reset 5", #"goaway 9 0 {"reason":"Shutdown"}"#])
        connection.framer.fail(HTTP2ConnectionError(code: HTTP2Wire.ErrorCode.protocolError, "test"))
        #expect(connection.written() == [Frames.Written(type: 0x7, flags: 0, stream: 0, payload: Frames.uint32(0) + Frames.uint32(1))])
    }

    /// Interim answers (1xx) come before the final one and are not it.
    @Test func anInterimAnswerIsNotTheAnswer() throws {
        var connection = try Connection.started()
        var bytes = try connection.answer(stream: 1, [(":status", "103"), ("link", "</x>")], endStream: false)
        bytes += try connection.answer(stream: 1, [(":status", "200"), ("apns-id", "A")])
        bytes += try connection.answer(stream: 3, [(":status", "100")], endStream: false)
        bytes += try connection.answer(stream: 3, [(":status", "410")], endStream: false)
        bytes += Frames.frame(0x0, flags: 0x1, stream: 3, Array(#"{"reason":"Unregistered"}"#.utf8))
        try connection.read(bytes)
        #expect(connection.events == ["answered 1 200", #"answered 3 410 {"reason":"Unregistered"}"#])
    }

    /// A reset after the final status cuts only the body short: the server decided, and the
    /// answer stands (sending it again could deliver it twice). Before any status, it is a reset.
    @Test func aResetAfterTheStatusKeepsTheAnswer() throws {
        var connection = try Connection.started()
        var bytes = try connection.answer(stream: 1, [(":status", "200")], endStream: false)
        bytes += Frames.frame(0x3, stream: 1, Frames.uint32(8))
        bytes += try connection.answer(stream: 3, [(":status", "400")], endStream: false)
        bytes += Frames.frame(0x0, stream: 3, Array(#"{"reason":"#.utf8))
        bytes += Frames.frame(0x3, stream: 3, Frames.uint32(0))
        bytes += try connection.answer(stream: 5, [(":status", "100")], endStream: false)
        bytes += Frames.frame(0x3, stream: 5, Frames.uint32(2))
        try connection.read(bytes)
        #expect(connection.events == ["answered 1 200", #"answered 3 400 {"reason":"#, "reset 5"])
    }

    /// A server may answer before it has read a request's body (RFC 9113 §8.1) and then give no
    /// more credit for it: the rest of the body is dropped and the stream cancelled, so that the
    /// requests behind it are not held.
    @Test func anAnswerBeforeTheWholeBodyCancelsTheRest() throws {
        var connection = try Connection.started(settings: [(3, 1_000), (4, 30)])
        connection.framer.writeRequest(streamID: 1, notification: Self.notification(payload: 100), authorization: nil)
        connection.framer.writeRequest(streamID: 3, notification: Self.notification(payload: 20), authorization: nil)
        #expect(connection.written().map(\.type) == [0x1, 0x0, 0x1])
        #expect(!connection.framer.acceptsRequests)
        let answer = try connection.answer(stream: 1, [(":status", "400")], endStream: false)
        try connection.read(answer + Frames.frame(0x0, flags: 0x1, stream: 1, Array(#"{"reason":"BadDeviceToken"}"#.utf8)))
        #expect(connection.events == [#"answered 1 400 {"reason":"BadDeviceToken"}"#])
        let frames = connection.written()
        #expect(frames.contains(Frames.Written(type: 0x3, flags: 0, stream: 1, payload: Frames.uint32(8))))
        #expect(frames.filter { $0.type == 0x0 }.map(\.stream) == [3])
        #expect(connection.framer.blockedRequests == 0 && connection.framer.acceptsRequests)
    }

    /// A reset of the stream whose body heads the queue lets the bodies behind it go.
    @Test func aResetStreamsBodyNoLongerHoldsTheOthers() throws {
        var connection = try Connection.started(settings: [(3, 1_000), (4, 30)])
        connection.framer.writeRequest(streamID: 1, notification: Self.notification(payload: 100), authorization: nil)
        connection.framer.writeRequest(streamID: 3, notification: Self.notification(payload: 20), authorization: nil)
        _ = connection.written()
        try connection.read(Frames.frame(0x3, stream: 1, Frames.uint32(7)))
        #expect(connection.written().map { [$0.type, UInt8($0.stream), $0.flags] } == [[0x0, 3, 0x1]])
        #expect(connection.framer.acceptsRequests)
    }

    @Test func aGoAwayDropsTheBodiesOfStreamsItRefused() throws {
        var connection = try Connection.started(settings: [(3, 1_000), (4, 10)])
        connection.framer.writeRequest(streamID: 1, notification: Self.notification(), authorization: nil)
        connection.framer.writeRequest(streamID: 3, notification: Self.notification(), authorization: nil)
        _ = connection.written()
        #expect(connection.framer.blockedRequests == 2)
        try connection.read(Frames.frame(0x7, Frames.uint32(1) + Frames.uint32(0)))
        #expect(connection.framer.blockedRequests == 1)
        try connection.read(Frames.frame(0x3, stream: 1, Frames.uint32(8)))
        #expect(connection.framer.blockedRequests == 0)
        #expect(connection.framer.acceptsRequests)
    }
}
