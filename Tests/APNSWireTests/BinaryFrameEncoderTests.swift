import APNSWire
import NIOCore
import PushFleetCore
import Testing

/// The 32 token bytes, in four rows of eight.
private let tokenBytes: [UInt8] = [
    0xC9, 0xD4, 0xC0, 0x7C, 0xFB, 0xBC, 0x26, 0xD6,
    0xEF, 0x87, 0xA4, 0x4D, 0x53, 0xE1, 0x69, 0x98,
    0xA3, 0xC4, 0xD8, 0xE1, 0xF0, 0xA2, 0xB3, 0xC4,
    0xD5, 0xE6, 0xF7, 0x08, 0x19, 0x2A, 0x3B, 0x4C,
]

/// `{"aps":{}}`, ten bytes.
private let payloadBytes: [UInt8] = [0x7B, 0x22, 0x61, 0x70, 0x73, 0x22, 0x3A, 0x7B, 0x7D, 0x7D]

private func samplePayload(format: PayloadFormat = .binaryFrame) throws -> Payload {
    try Payload(jsonText: payloadBytes, format: format)
}

/// A payload whose compact form is exactly `byteCount` bytes (at least 8).
private func payload(byteCount: Int) throws -> Payload {
    try Payload(.object([("p", .string(String(repeating: "x", count: byteCount - 8)))]), format: .voip)
}

private func written(_ write: (inout ByteBuffer) -> Void) -> [UInt8] {
    var buffer = ByteBuffer()
    write(&buffer)
    return Array(buffer.readableBytesView)
}

@Suite struct BinaryFrameEncoderTests {
    let encoder = BinaryFrameEncoder()

    @Test func command2WritesEveryItemInOrder() throws {
        let notification = BinaryNotification(
            token: try DeviceToken(bytes: tokenBytes),
            payload: try samplePayload(),
            expiration: 1_600_000_000,
            priority: 10,
            tag: 0xFFFF_FFFF  // the caller's own reference: never on the wire
        )
        let bytes = written { self.encoder.writeCommand2(identifier: 0xDEAD_BEEF, notification: notification, into: &$0) }

        var expected: [UInt8] = []
        expected += [0x02]  // command: 2 (frame format)
        expected += [0x00, 0x00, 0x00, 0x42]  // frame length: 66 = 5 item headers (15) + 32 + 10 + 4 + 4 + 1
        expected += [0x03]  // item 3 first: notification identifier
        expected += [0x00, 0x04]  // item length: 4
        expected += [0xDE, 0xAD, 0xBE, 0xEF]  // identifier 0xDEADBEEF, big-endian
        expected += [0x01]  // item 1: device token
        expected += [0x00, 0x20]  // item length: 32
        expected += [0xC9, 0xD4, 0xC0, 0x7C, 0xFB, 0xBC, 0x26, 0xD6]  // token bytes 0-7
        expected += [0xEF, 0x87, 0xA4, 0x4D, 0x53, 0xE1, 0x69, 0x98]  // token bytes 8-15
        expected += [0xA3, 0xC4, 0xD8, 0xE1, 0xF0, 0xA2, 0xB3, 0xC4]  // token bytes 16-23
        expected += [0xD5, 0xE6, 0xF7, 0x08, 0x19, 0x2A, 0x3B, 0x4C]  // token bytes 24-31
        expected += [0x02]  // item 2: payload
        expected += [0x00, 0x0A]  // item length: 10
        expected += [0x7B, 0x22, 0x61, 0x70, 0x73, 0x22, 0x3A, 0x7B, 0x7D, 0x7D]  // {"aps":{}}
        expected += [0x04]  // item 4: expiration date
        expected += [0x00, 0x04]  // item length: 4
        expected += [0x5F, 0x5E, 0x10, 0x00]  // 1,600,000,000 epoch seconds
        expected += [0x05]  // item 5: priority
        expected += [0x00, 0x01]  // item length: 1
        expected += [0x0A]  // priority 10: immediately

        #expect(bytes == expected)
        #expect(bytes.count == 71)
        #expect(BinaryFrameEncoder.frameSize(tokenByteCount: 32, payloadByteCount: 10) == bytes.count)
    }

    @Test func command2WithDefaultsWritesZeroExpirationAndPriority10() throws {
        // An 8-byte token and a two-byte payload: the encoder does not judge sizes.
        let notification = BinaryNotification(
            token: try DeviceToken(bytes: [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]),
            payload: try Payload(.object([]), format: .binaryFrame)
        )
        let bytes = written { self.encoder.writeCommand2(identifier: 1, notification: notification, into: &$0) }

        var expected: [UInt8] = []
        expected += [0x02]  // command 2
        expected += [0x00, 0x00, 0x00, 0x22]  // frame length: 34 = 15 + 8 + 2 + 4 + 4 + 1
        expected += [0x03, 0x00, 0x04]  // item 3: identifier, 4 bytes
        expected += [0x00, 0x00, 0x00, 0x01]  // identifier 1
        expected += [0x01, 0x00, 0x08]  // item 1: token, 8 bytes
        expected += [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]  // token
        expected += [0x02, 0x00, 0x02]  // item 2: payload, 2 bytes
        expected += [0x7B, 0x7D]  // {}
        expected += [0x04, 0x00, 0x04]  // item 4: expiration, 4 bytes
        expected += [0x00, 0x00, 0x00, 0x00]  // 0: do not store
        expected += [0x05, 0x00, 0x01]  // item 5: priority, 1 byte
        expected += [0x0A]  // default priority 10

        #expect(bytes == expected)
        #expect(BinaryFrameEncoder.frameSize(tokenByteCount: 8, payloadByteCount: 2) == bytes.count)
    }

    @Test func command2LengthsAreBigEndianAboveOneByte() throws {
        let notification = BinaryNotification(
            token: try DeviceToken(bytes: tokenBytes),
            payload: try payload(byteCount: 300),
            expiration: 0x0102_0304,
            priority: 5
        )
        let bytes = written { self.encoder.writeCommand2(identifier: 0x0A0B_0C0D, notification: notification, into: &$0) }
        var buffer = ByteBuffer(bytes: bytes)

        #expect(buffer.readInteger(as: UInt8.self) == 2)  // command
        let frameLength = buffer.readInteger(as: UInt32.self)
        #expect(frameLength == UInt32(15 + 32 + 300 + 9))  // frame length: 356 = 0x00000164
        #expect(Array(bytes[1..<5]) == [0x00, 0x00, 0x01, 0x64])
        #expect(buffer.readBytes(length: 7) == [0x03, 0x00, 0x04, 0x0A, 0x0B, 0x0C, 0x0D])  // identifier
        #expect(buffer.readInteger(as: UInt8.self) == 1)  // item 1
        #expect(buffer.readInteger(as: UInt16.self) == 32)
        #expect(buffer.readBytes(length: 32) == tokenBytes)
        #expect(buffer.readInteger(as: UInt8.self) == 2)  // item 2
        #expect(buffer.getBytes(at: buffer.readerIndex, length: 2) == [0x01, 0x2C])  // 300, high byte first
        #expect(buffer.readInteger(as: UInt16.self) == 300)
        #expect(buffer.readBytes(length: 300) == notification.payload.bytes)
        #expect(buffer.readBytes(length: 7) == [0x04, 0x00, 0x04, 0x01, 0x02, 0x03, 0x04])  // expiration
        #expect(buffer.readBytes(length: 4) == [0x05, 0x00, 0x01, 0x05])  // priority 5
        #expect(buffer.readableBytes == 0)
    }

    @Test(arguments: [1, 8, 32, 33, 100, 255], [2, 10, 256, 2048, 5120])
    func frameSizeMatchesTheBytesWritten(tokenCount: Int, payloadCount: Int) throws {
        let token = try DeviceToken(bytes: (0..<tokenCount).map { UInt8(truncatingIfNeeded: $0) })
        let body: Payload
        if payloadCount == 2 {
            body = try Payload(.object([]), format: .voip)  // {}
        } else {
            body = try payload(byteCount: payloadCount)
        }
        let notification = BinaryNotification(token: token, payload: body)

        var buffer = ByteBuffer()
        self.encoder.writeCommand2(identifier: 7, notification: notification, into: &buffer)
        #expect(buffer.readableBytes == BinaryFrameEncoder.frameSize(tokenByteCount: tokenCount, payloadByteCount: payloadCount))
        // The frame length field counts everything after the five-byte header.
        #expect(buffer.getInteger(at: 1, as: UInt32.self) == UInt32(buffer.readableBytes - 5))
    }

    @Test func framesAppendBackToBackWithoutDisturbingTheBuffer() throws {
        let first = BinaryNotification(token: try DeviceToken(bytes: tokenBytes), payload: try samplePayload())
        let second = BinaryNotification(token: try DeviceToken(bytes: [0xAB]), payload: try samplePayload(), priority: 5)
        var buffer = ByteBuffer(bytes: [0xEE])
        buffer.moveReaderIndex(forwardBy: 1)

        self.encoder.writeCommand2(identifier: 1, notification: first, into: &buffer)
        self.encoder.writeCommand2(identifier: 2, notification: second, into: &buffer)

        let firstSize = BinaryFrameEncoder.frameSize(tokenByteCount: 32, payloadByteCount: 10)
        let secondSize = BinaryFrameEncoder.frameSize(tokenByteCount: 1, payloadByteCount: 10)
        #expect(buffer.readerIndex == 1)
        #expect(buffer.readableBytes == firstSize + secondSize)
        #expect(buffer.getInteger(at: 1 + firstSize, as: UInt8.self) == 2)  // second frame's command
        #expect(buffer.getInteger(at: 1 + firstSize + 5 + 7 + 3, as: UInt8.self) == 0xAB)  // its one-byte token, after the identifier
        #expect(buffer.getInteger(at: 1 + firstSize + secondSize - 1, as: UInt8.self) == 5)  // its priority
    }

    @Test func sentinelIsACommand2FrameWithAZeroLengthToken() {
        let bytes = written { self.encoder.writeSentinel(identifier: 0x0000_0100, into: &$0) }

        var expected: [UInt8] = []
        expected += [0x02]  // command 2
        expected += [0x00, 0x00, 0x00, 0x1A]  // frame length: 26 = 15 + 0 + 2 + 4 + 4 + 1
        expected += [0x03, 0x00, 0x04]  // item 3: identifier, 4 bytes, before the bad item
        expected += [0x00, 0x00, 0x01, 0x00]  // identifier 256
        expected += [0x01, 0x00, 0x00]  // item 1: token, 0 bytes (the gateway must reject it)
        expected += [0x02, 0x00, 0x02]  // item 2: payload, 2 bytes
        expected += [0x7B, 0x7D]  // {}
        expected += [0x04, 0x00, 0x04]  // item 4: expiration, 4 bytes
        expected += [0x00, 0x00, 0x00, 0x00]  // 0
        expected += [0x05, 0x00, 0x01]  // item 5: priority, 1 byte
        expected += [0x0A]  // 10

        #expect(bytes == expected)
        #expect(BinaryFrameEncoder.frameSize(tokenByteCount: 0, payloadByteCount: 2) == bytes.count)
    }

    @Test func sentinelAfterFramesKeepsThemIntact() throws {
        let notification = BinaryNotification(token: try DeviceToken(bytes: tokenBytes), payload: try samplePayload())
        var buffer = ByteBuffer()
        self.encoder.writeCommand2(identifier: 1, notification: notification, into: &buffer)
        self.encoder.writeSentinel(identifier: 2, into: &buffer)
        let frameSize = BinaryFrameEncoder.frameSize(tokenByteCount: 32, payloadByteCount: 10)
        #expect(buffer.readableBytes == frameSize + BinaryFrameEncoder.frameSize(tokenByteCount: 0, payloadByteCount: 2))
        #expect(buffer.getBytes(at: frameSize, length: 12) == [0x02, 0x00, 0x00, 0x00, 0x1A, 0x03, 0x00, 0x04, 0x00, 0x00, 0x00, 0x02])
    }

    @Test func command1WritesTheEnhancedFormat() throws {
        let token = try DeviceToken(bytes: tokenBytes)
        let bytes = written {
            self.encoder.writeCommand1(identifier: 0xDEAD_BEEF, expiry: 1_600_000_000, token: token, payload: payloadBytes, into: &$0)
        }

        var expected: [UInt8] = []
        expected += [0x01]  // command: 1 (enhanced format)
        expected += [0xDE, 0xAD, 0xBE, 0xEF]  // identifier
        expected += [0x5F, 0x5E, 0x10, 0x00]  // expiry: 1,600,000,000
        expected += [0x00, 0x20]  // token length: 32
        expected += [0xC9, 0xD4, 0xC0, 0x7C, 0xFB, 0xBC, 0x26, 0xD6]  // token bytes 0-7
        expected += [0xEF, 0x87, 0xA4, 0x4D, 0x53, 0xE1, 0x69, 0x98]  // token bytes 8-15
        expected += [0xA3, 0xC4, 0xD8, 0xE1, 0xF0, 0xA2, 0xB3, 0xC4]  // token bytes 16-23
        expected += [0xD5, 0xE6, 0xF7, 0x08, 0x19, 0x2A, 0x3B, 0x4C]  // token bytes 24-31
        expected += [0x00, 0x0A]  // payload length: 10
        expected += [0x7B, 0x22, 0x61, 0x70, 0x73, 0x22, 0x3A, 0x7B, 0x7D, 0x7D]  // {"aps":{}}

        #expect(bytes == expected)
        #expect(bytes.count == 1 + 4 + 4 + 2 + 32 + 2 + 10)
    }

    @Test func command0WritesTheSimpleFormat() throws {
        let token = try DeviceToken(bytes: tokenBytes)
        let bytes = written { self.encoder.writeCommand0(token: token, payload: payloadBytes, into: &$0) }

        var expected: [UInt8] = []
        expected += [0x00]  // command: 0 (simple format), no identifier
        expected += [0x00, 0x20]  // token length: 32
        expected += [0xC9, 0xD4, 0xC0, 0x7C, 0xFB, 0xBC, 0x26, 0xD6]  // token bytes 0-7
        expected += [0xEF, 0x87, 0xA4, 0x4D, 0x53, 0xE1, 0x69, 0x98]  // token bytes 8-15
        expected += [0xA3, 0xC4, 0xD8, 0xE1, 0xF0, 0xA2, 0xB3, 0xC4]  // token bytes 16-23
        expected += [0xD5, 0xE6, 0xF7, 0x08, 0x19, 0x2A, 0x3B, 0x4C]  // token bytes 24-31
        expected += [0x00, 0x0A]  // payload length: 10
        expected += [0x7B, 0x22, 0x61, 0x70, 0x73, 0x22, 0x3A, 0x7B, 0x7D, 0x7D]  // {"aps":{}}

        #expect(bytes == expected)
        #expect(bytes.count == 1 + 2 + 32 + 2 + 10)
    }

    @Test func commands0And1WriteAnyTokenAndPayloadLength() throws {
        // Heap-stored token (100 bytes) and an empty payload: the gateway, not the encoder, judges them.
        let token = try DeviceToken(bytes: [UInt8](repeating: 0x5A, count: 100))
        let zero = written { self.encoder.writeCommand0(token: token, payload: [], into: &$0) }
        #expect(Array(zero.prefix(3)) == [0x00, 0x00, 0x64])  // command 0, token length 100
        #expect(Array(zero[3..<103]) == [UInt8](repeating: 0x5A, count: 100))
        #expect(Array(zero.suffix(2)) == [0x00, 0x00])  // payload length 0
        #expect(zero.count == 105)

        let one = written {
            self.encoder.writeCommand1(identifier: 0, expiry: 0, token: token, payload: [UInt8](repeating: 0x20, count: 258), into: &$0)
        }
        #expect(Array(one.prefix(11)) == [0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x64])
        #expect(Array(one[111..<113]) == [0x01, 0x02])  // payload length 258
        #expect(one.count == 113 + 258)
    }
}
