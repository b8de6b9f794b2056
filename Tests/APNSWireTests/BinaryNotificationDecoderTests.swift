import APNSWire
import NIOCore
import NIOTestUtils
import PushFleetCore
import Testing

private let tokenBytes: [UInt8] = [
    0xC9, 0xD4, 0xC0, 0x7C, 0xFB, 0xBC, 0x26, 0xD6,
    0xEF, 0x87, 0xA4, 0x4D, 0x53, 0xE1, 0x69, 0x98,
    0xA3, 0xC4, 0xD8, 0xE1, 0xF0, 0xA2, 0xB3, 0xC4,
    0xD5, 0xE6, 0xF7, 0x08, 0x19, 0x2A, 0x3B, 0x4C,
]

/// `{"aps":{}}`
private let payloadBytes: [UInt8] = Array(#"{"aps":{}}"#.utf8)

/// One item of a command-2 frame; `length` may lie about `data` to build malformed frames.
private func item(_ id: UInt8, _ data: [UInt8], length: Int? = nil) -> [UInt8] {
    let length = UInt16(length ?? data.count)
    return [id, UInt8(length >> 8), UInt8(length & 0xFF)] + data
}

/// A command-2 frame around `items`, with the frame length they add up to unless told otherwise.
private func frame(_ items: [UInt8]..., length: UInt32? = nil) -> [UInt8] {
    let body = items.flatMap { $0 }
    let length = length ?? UInt32(body.count)
    return [0x02, UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + body
}

private func notification(
    command: UInt8,
    identifier: UInt32 = 0,
    token: [UInt8]? = tokenBytes,
    payload: [UInt8]? = payloadBytes,
    expiration: UInt32? = nil,
    priority: UInt8? = nil
) -> BinaryInboundMessage {
    .notification(
        BinaryInboundNotification(
            command: command,
            identifier: identifier,
            token: token.map { ByteBuffer(bytes: $0) },
            payload: payload.map { ByteBuffer(bytes: $0) },
            expiration: expiration,
            priority: priority
        )
    )
}

/// Decodes everything `bytes` holds, as a gateway would, and reports how much was left unread.
private func decodeAll(_ bytes: [UInt8]) throws -> (messages: [BinaryInboundMessage], leftover: Int) {
    var decoder = BinaryNotificationDecoder()
    var buffer = ByteBuffer(bytes: bytes)
    var messages: [BinaryInboundMessage] = []
    while let message = try decoder.decode(buffer: &buffer) { messages.append(message) }
    return (messages, buffer.readableBytes)
}

@Suite struct BinaryNotificationDecoderTests {
    let encoder = BinaryFrameEncoder()

    // MARK: - Well-formed input, drip-fed and batched

    @Test func decodesAllThreeCommandsDripFedAndBatched() throws {
        let token = try DeviceToken(bytes: tokenBytes)
        let payload = try Payload(jsonText: payloadBytes, format: .binaryFrame)
        var pairs: [(ByteBuffer, [BinaryInboundMessage])] = []

        var zero = ByteBuffer()
        self.encoder.writeCommand0(token: token, payload: payloadBytes, into: &zero)
        pairs.append((zero, [notification(command: 0)]))

        var one = ByteBuffer()
        self.encoder.writeCommand1(identifier: 0x0102_0304, expiry: 1_600_000_000, token: token, payload: payloadBytes, into: &one)
        pairs.append((one, [notification(command: 1, identifier: 0x0102_0304, expiration: 1_600_000_000)]))

        var two = ByteBuffer()
        self.encoder.writeCommand2(
            identifier: 0xDEAD_BEEF,
            notification: BinaryNotification(token: token, payload: payload, expiration: 7, priority: 5),
            into: &two
        )
        pairs.append((two, [notification(command: 2, identifier: 0xDEAD_BEEF, expiration: 7, priority: 5)]))

        // Two frames in one write produce two messages.
        var twoFrames = ByteBuffer()
        for identifier in [UInt32(1), 2] {
            self.encoder.writeCommand2(identifier: identifier, notification: BinaryNotification(token: token, payload: payload), into: &twoFrames)
        }
        pairs.append((
            twoFrames,
            [
                notification(command: 2, identifier: 1, expiration: 0, priority: 10),
                notification(command: 2, identifier: 2, expiration: 0, priority: 10),
            ]
        ))

        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs, decoderFactory: { BinaryNotificationDecoder() })
    }

    @Test func decodesHandWrittenFramesWithItemsInAnyOrderAndSomeMissing() throws {
        // pushy 0.4 wrote items in the order 3, 1, 2, 4, 5.
        let pushyOrder = frame(
            item(3, [0x00, 0x00, 0x00, 0x2A]),  // identifier 42
            item(1, tokenBytes),  // token
            item(2, payloadBytes),  // payload
            item(4, [0x00, 0x00, 0x00, 0x00]),  // expiration 0
            item(5, [0x0A])  // priority 10
        )
        // Only token and payload: the rest is the validator's business, not the decoder's.
        let tokenAndPayload = frame(item(2, payloadBytes), item(1, tokenBytes))
        // pushy's "known bad" notification: a zero-length token.
        let emptyToken = frame(item(1, []), item(2, payloadBytes), item(3, [0x00, 0x00, 0x01, 0x00]))
        // A frame with no items at all.
        let empty = frame()

        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [
                (ByteBuffer(bytes: pushyOrder), [notification(command: 2, identifier: 42, expiration: 0, priority: 10)]),
                (ByteBuffer(bytes: tokenAndPayload), [notification(command: 2)]),
                (ByteBuffer(bytes: emptyToken), [notification(command: 2, identifier: 256, token: [])]),
                (ByteBuffer(bytes: empty), [notification(command: 2, token: nil, payload: nil)]),
            ],
            decoderFactory: { BinaryNotificationDecoder() }
        )
    }

    @Test func decodesCommands0And1WithOtherLengths() throws {
        let command0: [UInt8] = [
            0x00,  // command 0
            0x00, 0x02,  // token length 2
            0xAA, 0xBB,  // token
            0x00, 0x00,  // payload length 0
        ]
        let command1: [UInt8] = [
            0x01,  // command 1
            0xFF, 0xFF, 0xFF, 0xFF,  // identifier
            0x00, 0x00, 0x00, 0x01,  // expiry 1
            0x00, 0x00,  // token length 0
            0x00, 0x03,  // payload length 3
            0x31, 0x32, 0x33,  // payload "123"
        ]
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [
                (ByteBuffer(bytes: command0), [notification(command: 0, token: [0xAA, 0xBB], payload: [])]),
                (ByteBuffer(bytes: command1), [notification(command: 1, identifier: .max, token: [], payload: [0x31, 0x32, 0x33], expiration: 1)]),
            ],
            decoderFactory: { BinaryNotificationDecoder() }
        )
    }

    @Test func incompleteInputIsNotConsumed() throws {
        let token = try DeviceToken(bytes: tokenBytes)
        var whole = ByteBuffer()
        self.encoder.writeCommand0(token: token, payload: payloadBytes, into: &whole)
        self.encoder.writeCommand1(identifier: 1, expiry: 2, token: token, payload: payloadBytes, into: &whole)
        self.encoder.writeCommand2(
            identifier: 3,
            notification: BinaryNotification(token: token, payload: try Payload(jsonText: payloadBytes, format: .binaryFrame)),
            into: &whole
        )
        let sizes = [5 + 32 + 10, 13 + 32 + 10, BinaryFrameEncoder.frameSize(tokenByteCount: 32, payloadByteCount: 10)]
        #expect(whole.readableBytes == sizes.reduce(0, +))

        var offset = 0
        for size in sizes {
            let message = Array(whole.readableBytesView.dropFirst(offset).prefix(size))
            for available in 1..<size {
                var decoder = BinaryNotificationDecoder()
                var buffer = ByteBuffer(bytes: message.prefix(available))
                #expect(try decoder.decode(buffer: &buffer) == nil, "\(available) of \(size) bytes")
                #expect(buffer.readerIndex == 0)
            }
            offset += size
        }

        var decoder = BinaryNotificationDecoder()
        var empty = ByteBuffer()
        #expect(try decoder.decode(buffer: &empty) == nil)
        #expect(try decoder.decodeLast(buffer: &empty, seenEOF: true) == nil)
    }

    // MARK: - Round trip with the encoder

    @Test(arguments: [
        (UInt32(0), UInt32(0), UInt8(10), 32),
        (UInt32(1), UInt32(1_600_000_000), UInt8(5), 32),
        (UInt32.max, UInt32.max, UInt8(0xFF), 32),
        (UInt32(0x8000_0000), UInt32(1), UInt8(10), 8),
        (UInt32(12_345), UInt32(0), UInt8(10), 100),
    ])
    func encoderOutputDecodesIntoTheSameFields(identifier: UInt32, expiration: UInt32, priority: UInt8, tokenCount: Int) throws {
        let tokenBytes = (0..<tokenCount).map { UInt8(truncatingIfNeeded: $0 * 3 + 1) }
        let payload = try Payload(
            .object([("aps", .object([("alert", .string("门铃 \(identifier)"))])), ("n", .integer(tokenCount))]),
            format: .binaryFrame
        )
        let sent = BinaryNotification(token: try DeviceToken(bytes: tokenBytes), payload: payload, expiration: expiration, priority: priority)
        var buffer = ByteBuffer()
        self.encoder.writeCommand2(identifier: identifier, notification: sent, into: &buffer)

        var decoder = BinaryNotificationDecoder()
        let message = try decoder.decode(buffer: &buffer)
        guard case .notification(let received) = message else {
            Issue.record("expected a notification, got \(String(describing: message))")
            return
        }
        #expect(buffer.readableBytes == 0)
        #expect(received.command == 2)
        #expect(received.identifier == identifier)
        #expect(received.token.map { Array($0.readableBytesView) } == sent.token.bytes)
        #expect(received.payload.map { Array($0.readableBytesView) } == sent.payload.bytes)
        #expect(received.expiration == expiration)
        #expect(received.priority == priority)
    }

    @Test func commands0And1RoundTripToo() throws {
        let token = try DeviceToken(bytes: tokenBytes.reversed())
        var buffer = ByteBuffer()
        self.encoder.writeCommand0(token: token, payload: Array("{}".utf8), into: &buffer)
        self.encoder.writeCommand1(identifier: 99, expiry: 100, token: token, payload: Array("{}".utf8), into: &buffer)
        let (messages, leftover) = try decodeAll(Array(buffer.readableBytesView))
        #expect(leftover == 0)
        #expect(messages == [
            notification(command: 0, token: token.bytes, payload: Array("{}".utf8)),
            notification(command: 1, identifier: 99, token: token.bytes, payload: Array("{}".utf8), expiration: 100),
        ])
    }

    @Test func sentinelDecodesAsANotificationWithAnEmptyToken() throws {
        // The decoder reads it; rejecting the empty token is the validator's job.
        var buffer = ByteBuffer()
        self.encoder.writeSentinel(identifier: 77, into: &buffer)
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [
                (buffer, [notification(command: 2, identifier: 77, token: [], payload: Array("{}".utf8), expiration: 0, priority: 10)])
            ],
            decoderFactory: { BinaryNotificationDecoder() }
        )
    }

    // MARK: - Malformed input

    @Test(arguments: [UInt8(3), 7, 8, 0x80, 0xFF])
    func unknownCommandIsUnparseableAndDrainsTheBuffer(command: UInt8) throws {
        let (messages, leftover) = try decodeAll([command, 0x01, 0x02, 0x03] + frame(item(1, tokenBytes)))
        #expect(messages == [.unparseable(identifier: 0, reason: "unknown command \(command)")])
        #expect(leftover == 0)
    }

    @Test func unknownCommandAfterAGoodFrame() throws {
        let good = frame(item(1, tokenBytes), item(2, payloadBytes), item(3, [0, 0, 0, 5]))
        let (messages, leftover) = try decodeAll(good + [0x09, 0x00])
        #expect(messages == [
            notification(command: 2, identifier: 5),
            .unparseable(identifier: 0, reason: "unknown command 9"),
        ])
        #expect(leftover == 0)
    }

    @Test(arguments: [UInt8(0), 6, 9, 0xFF])
    func unknownItemIsUnparseableAndReportsTheIdentifierReadSoFar(itemID: UInt8) throws {
        let bad = frame(item(3, [0x00, 0x00, 0x00, 0x07]), item(1, tokenBytes), item(itemID, [0x01]), item(2, payloadBytes))
        let next = frame(item(3, [0x00, 0x00, 0x00, 0x08]))
        let (messages, leftover) = try decodeAll(bad + next)
        // The frame length still delimits the bad frame, so the decoder stops exactly at its end.
        #expect(messages == [
            .unparseable(identifier: 7, reason: "unknown item \(itemID)"),
            notification(command: 2, identifier: 8, token: nil, payload: nil),
        ])
        #expect(leftover == 0)
    }

    @Test func problemBeforeTheIdentifierItemReportsIdentifierZero() throws {
        let (messages, _) = try decodeAll(frame(item(6, []), item(3, [0x00, 0x00, 0x00, 0x07])))
        #expect(messages == [.unparseable(identifier: 0, reason: "unknown item 6")])
    }

    @Test(arguments: [UInt8(1), 2, 3, 4, 5])
    func duplicateItemIsUnparseable(itemID: UInt8) throws {
        let data: [UInt8] =
            switch itemID {
            case 1: tokenBytes
            case 2: payloadBytes
            case 5: [0x0A]
            default: [0x00, 0x00, 0x00, 0x09]
            }
        let bytes = frame(item(3, [0x00, 0x00, 0x00, 0x09]), item(1, tokenBytes), item(2, payloadBytes), item(4, [0, 0, 0, 0]), item(5, [5]), item(itemID, data))
        let (messages, leftover) = try decodeAll(bytes)
        #expect(messages == [.unparseable(identifier: 9, reason: "item \(itemID) appears twice")])
        #expect(leftover == 0)
    }

    @Test func itemDataRunningPastTheFrameEndIsUnparseable() throws {
        // The token item claims 32 bytes but the frame ends after 10 of them.
        let bytes = frame(item(3, [0x00, 0x00, 0x00, 0x04]), item(1, Array(tokenBytes.prefix(10)), length: 32))
        let (messages, leftover) = try decodeAll(bytes)
        #expect(messages == [.unparseable(identifier: 4, reason: "item header or data runs past the end of the frame")])
        #expect(leftover == 0)
    }

    @Test func itemHeaderRunningPastTheFrameEndIsUnparseable() throws {
        // Two stray bytes after the last item: half an item header.
        let bytes = frame(item(1, tokenBytes), [0x02, 0x00])
        let (messages, leftover) = try decodeAll(bytes)
        #expect(messages == [.unparseable(identifier: 0, reason: "item header or data runs past the end of the frame")])
        #expect(leftover == 0)
    }

    @Test func frameLengthShorterThanItsItemsCutsTheLastItem() throws {
        // The frame length stops 2 bytes into the payload; the rest of the payload becomes the next "command".
        var bytes = frame(item(1, tokenBytes), item(2, payloadBytes))
        let declared = UInt32(3 + 32 + 3 + 2)
        bytes.replaceSubrange(1..<5, with: [0x00, 0x00, 0x00, UInt8(declared)])
        let (messages, _) = try decodeAll(bytes)
        #expect(messages.first == .unparseable(identifier: 0, reason: "item header or data runs past the end of the frame"))
    }

    @Test(arguments: [
        (UInt8(3), [UInt8](repeating: 0, count: 3), "identifier item is 3 bytes, not 4"),
        (3, [UInt8](repeating: 0, count: 5), "identifier item is 5 bytes, not 4"),
        (3, [], "identifier item is 0 bytes, not 4"),
        (4, [UInt8](repeating: 0, count: 8), "expiration item is 8 bytes, not 4"),
        (4, [0x01], "expiration item is 1 bytes, not 4"),
        (5, [0x00, 0x0A], "priority item is 2 bytes, not 1"),
        (5, [], "priority item is 0 bytes, not 1"),
    ])
    func fixedSizeItemsOfTheWrongLengthAreUnparseable(itemID: UInt8, data: [UInt8], reason: String) throws {
        let bytes = frame(item(1, tokenBytes), item(itemID, data), item(2, payloadBytes))
        let (messages, leftover) = try decodeAll(bytes)
        #expect(messages == [.unparseable(identifier: 0, reason: reason)])
        #expect(leftover == 0)
    }

    @Test func frameLengthOverTheMaximumIsUnparseableAtOnce() throws {
        #expect(BinaryNotificationDecoder.maximumFrameLength == 5 * (3 + 65_535))
        let tooLong = UInt32(BinaryNotificationDecoder.maximumFrameLength + 1)
        // Only the five header bytes have arrived: the decoder must not wait for 320 KiB that never come.
        let (messages, leftover) = try decodeAll(frame(length: tooLong) + [0x01, 0x02])
        #expect(messages == [.unparseable(identifier: 0, reason: "frame length 327691 exceeds 327690 bytes")])
        #expect(leftover == 0)

        let (huge, _) = try decodeAll(frame(length: .max))
        #expect(huge == [.unparseable(identifier: 0, reason: "frame length 4294967295 exceeds 327690 bytes")])
    }

    @Test func frameLengthAtTheMaximumWaitsForItsBytes() throws {
        let atMaximum = frame(length: UInt32(BinaryNotificationDecoder.maximumFrameLength))
        var decoder = BinaryNotificationDecoder()
        var buffer = ByteBuffer(bytes: atMaximum + [0x01, 0xFF, 0xFF])
        #expect(try decoder.decode(buffer: &buffer) == nil)
        #expect(buffer.readerIndex == 0)
    }

    @Test func largestItemsDecode() throws {
        // A 65,535-byte payload item: the largest a 16-bit length allows.
        let bigPayload = [UInt8](repeating: 0x20, count: 65_535)
        let bytes = frame(item(1, tokenBytes), item(2, bigPayload), item(3, [0, 0, 0, 1]))
        let (messages, leftover) = try decodeAll(bytes)
        #expect(messages == [notification(command: 2, identifier: 1, payload: bigPayload)])
        #expect(leftover == 0)
    }
}
