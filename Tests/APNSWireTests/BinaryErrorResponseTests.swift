import APNSWire
import NIOCore
import NIOTestUtils
import Testing

@Suite struct BinaryErrorResponseTests {
    // MARK: - Writing

    @Test func writesTheSixBytePacket() {
        var buffer = ByteBuffer()
        BinaryErrorResponse(status: .invalidToken, identifier: 0x0102_0304).write(into: &buffer)

        let expected: [UInt8] = [
            0x08,  // command: 8 (error response)
            0x08,  // status: 8, InvalidToken
            0x01, 0x02, 0x03, 0x04,  // identifier 0x01020304, big-endian
        ]
        #expect(Array(buffer.readableBytesView) == expected)
        #expect(BinaryErrorResponse.command == 8)
        #expect(BinaryErrorResponse.byteCount == 6)
    }

    @Test func writesShutdownAndUnknownStatuses() {
        var buffer = ByteBuffer()
        BinaryErrorResponse(status: .shutdown, identifier: .max).write(into: &buffer)
        BinaryErrorResponse(status: BinaryStatus(rawValue: 42), identifier: 0).write(into: &buffer)

        let expected: [UInt8] = [
            0x08,  // command 8
            0x0A,  // status 10: Shutdown
            0xFF, 0xFF, 0xFF, 0xFF,  // identifier 4,294,967,295
            0x08,  // command 8
            0x2A,  // status 42: undocumented, kept as is
            0x00, 0x00, 0x00, 0x00,  // identifier 0
        ]
        #expect(Array(buffer.readableBytesView) == expected)
    }

    // MARK: - Decoding

    @Test func decoderHandlesDripFedAndBatchedInput() throws {
        let responses = [
            BinaryErrorResponse(status: .invalidToken, identifier: 37),
            BinaryErrorResponse(status: .shutdown, identifier: 0xFFFF_FFFF),
            BinaryErrorResponse(status: .processingError, identifier: 0),
            BinaryErrorResponse(status: .protocolError, identifier: 0x8000_0000),
            BinaryErrorResponse(status: BinaryStatus(rawValue: 42), identifier: 0x0102_0304),
        ]
        let pairs = responses.map { response -> (ByteBuffer, [BinaryErrorResponse]) in
            var buffer = ByteBuffer()
            response.write(into: &buffer)
            return (buffer, [response])
        }
        try ByteToMessageDecoderVerifier.verifyDecoder(inputOutputPairs: pairs, decoderFactory: { BinaryErrorResponseDecoder() })
    }

    @Test func decoderReadsHandWrittenBytes() throws {
        let bytes: [UInt8] = [
            0x08,  // command 8
            0x07,  // status 7: InvalidPayloadSize
            0x00, 0x00, 0x30, 0x39,  // identifier 12,345
        ]
        try ByteToMessageDecoderVerifier.verifyDecoder(
            inputOutputPairs: [(ByteBuffer(bytes: bytes), [BinaryErrorResponse(status: .invalidPayloadSize, identifier: 12_345)])],
            decoderFactory: { BinaryErrorResponseDecoder() }
        )
    }

    @Test(arguments: 0..<6)
    func decoderWaitsForAllSixBytesWithoutConsuming(available: Int) throws {
        var decoder = BinaryErrorResponseDecoder()
        let packet: [UInt8] = [0x08, 0x08, 0x00, 0x00, 0x00, 0x01]
        var buffer = ByteBuffer(bytes: packet.prefix(available))
        #expect(try decoder.decode(buffer: &buffer) == nil)
        #expect(buffer.readerIndex == 0)
        #expect(buffer.readableBytes == available)
    }

    @Test func decoderLeavesFollowingBytesInTheBuffer() throws {
        var decoder = BinaryErrorResponseDecoder()
        var buffer = ByteBuffer(bytes: [0x08, 0x01, 0x00, 0x00, 0x00, 0x09, 0x08, 0x0A])
        #expect(try decoder.decode(buffer: &buffer) == BinaryErrorResponse(status: .processingError, identifier: 9))
        #expect(buffer.readableBytes == 2)
        #expect(try decoder.decode(buffer: &buffer) == nil)
    }

    @Test(arguments: [UInt8(0), 1, 2, 7, 9, 0xFF])
    func decoderRejectsAnyOtherCommand(command: UInt8) {
        var decoder = BinaryErrorResponseDecoder()
        var buffer = ByteBuffer(bytes: [command, 0x08, 0x00, 0x00, 0x00, 0x01])
        let error = #expect(throws: APNSWireError.self) { try decoder.decode(buffer: &buffer) }
        #expect(error?.code == .unexpectedCommand)
        #expect(error?.message == "received command \(command) where command 8 was expected")
    }

    @Test func decodeLastDecodesWhatIsComplete() throws {
        var decoder = BinaryErrorResponseDecoder()
        var buffer = ByteBuffer(bytes: [0x08, 0x0A, 0x00, 0x00, 0x00, 0x05])
        #expect(try decoder.decodeLast(buffer: &buffer, seenEOF: true) == BinaryErrorResponse(status: .shutdown, identifier: 5))
        #expect(try decoder.decodeLast(buffer: &buffer, seenEOF: true) == nil)
    }

    @Test func everyStatusRoundTrips() throws {
        var decoder = BinaryErrorResponseDecoder()
        for status in UInt8.min...UInt8.max {
            let response = BinaryErrorResponse(status: BinaryStatus(rawValue: status), identifier: UInt32(status) << 24 | 0xABCDEF)
            var buffer = ByteBuffer()
            response.write(into: &buffer)
            #expect(buffer.readableBytes == BinaryErrorResponse.byteCount)
            #expect(try decoder.decode(buffer: &buffer) == response)
            #expect(buffer.readableBytes == 0)
        }
    }
}
