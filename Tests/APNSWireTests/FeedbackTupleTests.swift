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

private func tuple(_ timestamp: UInt32, _ bytes: [UInt8]) throws -> FeedbackTuple {
    FeedbackTuple(timestamp: timestamp, token: try DeviceToken(bytes: bytes))
}

private func encoded(_ tuple: FeedbackTuple) -> ByteBuffer {
    var buffer = ByteBuffer()
    tuple.write(into: &buffer)
    return buffer
}

@Suite struct FeedbackTupleTests {
    @Test func writesTimestampLengthAndToken() throws {
        let bytes = Array(encoded(try tuple(1_600_000_000, tokenBytes)).readableBytesView)

        var expected: [UInt8] = []
        expected += [0x5F, 0x5E, 0x10, 0x00]  // timestamp: 1,600,000,000 epoch seconds
        expected += [0x00, 0x20]  // token length: 32
        expected += [0xC9, 0xD4, 0xC0, 0x7C, 0xFB, 0xBC, 0x26, 0xD6]  // token bytes 0-7
        expected += [0xEF, 0x87, 0xA4, 0x4D, 0x53, 0xE1, 0x69, 0x98]  // token bytes 8-15
        expected += [0xA3, 0xC4, 0xD8, 0xE1, 0xF0, 0xA2, 0xB3, 0xC4]  // token bytes 16-23
        expected += [0xD5, 0xE6, 0xF7, 0x08, 0x19, 0x2A, 0x3B, 0x4C]  // token bytes 24-31

        #expect(bytes == expected)
        #expect(bytes.count == 38)  // the 38-byte tuple of practice: 4 + 2 + 32
    }

    @Test func writesOtherTokenLengths() throws {
        let short = Array(encoded(try tuple(0xFFFF_FFFF, [0xAB])).readableBytesView)
        #expect(short == [0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x01, 0xAB])  // timestamp max, length 1, token

        let long = Array(encoded(try tuple(0, [UInt8](repeating: 0x11, count: 255))).readableBytesView)
        #expect(Array(long.prefix(6)) == [0x00, 0x00, 0x00, 0x00, 0x00, 0xFF])  // timestamp 0, length 255
        #expect(long.count == 6 + 255)
    }

    @Test func decoderHandlesDripFedAndBatchedInput() throws {
        let tuples = [
            try tuple(1_600_000_000, tokenBytes),
            try tuple(0, [0x01]),
            try tuple(0xFFFF_FFFF, [UInt8](repeating: 0xEE, count: 8)),
            try tuple(1_234_567_890, (0..<33).map { UInt8($0) }),  // heap-stored token
            try tuple(42, (0..<255).map { UInt8($0) }),
        ]
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: tuples.map { (encoded($0), [$0]) },
            decoderFactory: { FeedbackTupleDecoder() }
        )
    }

    @Test func decoderReadsHandWrittenBytes() throws {
        let bytes: [UInt8] = [
            0x00, 0x00, 0x01, 0x00,  // timestamp 256
            0x00, 0x04,  // token length 4
            0xDE, 0xAD, 0xBE, 0xEF,  // token
        ]
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [(ByteBuffer(bytes: bytes), [try tuple(256, [0xDE, 0xAD, 0xBE, 0xEF])])],
            decoderFactory: { FeedbackTupleDecoder() }
        )
    }

    @Test func decoderWaitsForTheWholeTupleWithoutConsuming() throws {
        let whole = Array(encoded(try tuple(7, tokenBytes)).readableBytesView)
        var decoder = FeedbackTupleDecoder()
        for available in 0..<whole.count {
            var buffer = ByteBuffer(bytes: whole.prefix(available))
            #expect(try decoder.decode(buffer: &buffer) == nil, "\(available) bytes")
            #expect(buffer.readerIndex == 0)
        }
        var buffer = ByteBuffer(bytes: whole + [0x00, 0x00])
        #expect(try decoder.decode(buffer: &buffer) == (try tuple(7, tokenBytes)))
        #expect(buffer.readableBytes == 2)
    }

    @Test func decoderRejectsAnEmptyToken() {
        var decoder = FeedbackTupleDecoder()
        var buffer = ByteBuffer(bytes: [0x00, 0x00, 0x00, 0x01, 0x00, 0x00])
        let error = #expect(throws: APNSWireError.self) { try decoder.decode(buffer: &buffer) }
        #expect(error?.code == .invalidFeedbackToken)
        #expect(error?.message == "feedback tuple carries a 0-byte token")
    }

    @Test func decoderRejectsATokenOverTheMaximum() {
        var decoder = FeedbackTupleDecoder()
        var buffer = ByteBuffer(bytes: [0x00, 0x00, 0x00, 0x01, 0x01, 0x00] + [UInt8](repeating: 0x22, count: 256))
        let error = #expect(throws: APNSWireError.self) { try decoder.decode(buffer: &buffer) }
        #expect(error?.code == .invalidFeedbackToken)
        #expect(error?.message == "feedback tuple carries a 256-byte token")
    }

    @Test func decodeLastAtEndOfStreamReportsATruncatedTuple() throws {
        var decoder = FeedbackTupleDecoder()
        var buffer = encoded(try tuple(9, tokenBytes))
        buffer.writeBytes([0x00, 0x00, 0x00, 0x0A, 0x00, 0x20, 0x01])  // header and one byte of a second token

        #expect(try decoder.decodeLast(buffer: &buffer, seenEOF: true) == (try tuple(9, tokenBytes)))
        let error = #expect(throws: APNSWireError.self) { try decoder.decodeLast(buffer: &buffer, seenEOF: true) }
        #expect(error?.code == .truncated)
        #expect(error?.message == "connection closed with 7 bytes of an incomplete feedback tuple")
    }

    @Test func decodeLastWithNothingLeftIsQuiet() throws {
        var decoder = FeedbackTupleDecoder()
        var empty = ByteBuffer()
        #expect(try decoder.decodeLast(buffer: &empty, seenEOF: true) == nil)

        // Without EOF (the handler is being removed), a partial tuple is simply not decoded yet.
        var partial = ByteBuffer(bytes: [0x00, 0x00])
        #expect(try decoder.decodeLast(buffer: &partial, seenEOF: false) == nil)
    }

    @Test func tuplesCompareByTimestampAndToken() throws {
        #expect(try tuple(1, tokenBytes) == (try tuple(1, tokenBytes)))
        #expect(try tuple(1, tokenBytes) != (try tuple(2, tokenBytes)))
        #expect(try tuple(1, tokenBytes) != (try tuple(1, Array(tokenBytes.reversed()))))
    }
}
