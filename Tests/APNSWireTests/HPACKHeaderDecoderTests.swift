import APNSWire
import NIOCore
import NIOHPACK
import PushFleetCore
import Testing

/// The full header decoder against NIOHPACK's encoder (Huffman, indexing, evictions) and against
/// this project's request encoder, NIOHPACK's decoder reading the same blocks as the oracle.
@Suite struct HPACKHeaderDecoderTests {
    private static func decodeBoth(
        _ blocks: [ByteBuffer], tableSize: Int = 4_096
    ) throws -> (ours: [[HTTP2HeaderField]], oracle: [[HTTP2HeaderField]], sizes: [Int]) {
        var decoder = HPACKHeaderDecoder(maximumSize: tableSize)
        var oracle = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: tableSize)
        var ours: [[HTTP2HeaderField]] = []
        var theirs: [[HTTP2HeaderField]] = []
        var sizes: [Int] = []
        for block in blocks {
            var fields: [HTTP2HeaderField] = []
            _ = try decoder.decode(block, into: &fields)
            ours.append(fields)
            sizes.append(decoder.size)
            var copy = block
            theirs.append(try oracle.decodeHeaders(from: &copy).map { HTTP2HeaderField($0.name, $0.value) })
        }
        return (ours, theirs, sizes)
    }

    /// Header lists with repeats, new values that evict old ones, Huffman-friendly and unfriendly
    /// strings, empty values and long ones.
    private static func lists(count: Int, seed: UInt64) -> [[(String, String)]] {
        // A linear congruential generator: the same lists every run.
        var state = seed
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        let names = [":method", ":path", ":scheme", ":authority", "apns-topic", "apns-push-type", "authorization", "x-custom", "content-length"]
        return (0..<count).map { _ in
            (0..<Int(next() % 8 + 1)).map { _ in
                let name = names[Int(next() % UInt64(names.count))]
                let length = Int(next() % 4 == 0 ? next() % 300 : next() % 12)
                let value = String((0..<length).map { _ in Character(UnicodeScalar(UInt8(next() % 94 + 33))) })
                return (name, value)
            }
        }
    }

    @Test(arguments: [(4_096, true), (256, true), (0, true), (4_096, false)])
    func decodesWhatNIOHPACKEncodesBlockAfterBlock(tableSize: Int, huffman: Bool) throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: huffman, maxDynamicTableSize: tableSize)
        var blocks: [ByteBuffer] = []
        for list in Self.lists(count: 200, seed: 7) {
            try encoder.beginEncoding(allocator: ByteBufferAllocator())
            try encoder.append(headers: list)
            blocks.append(try encoder.endEncoding())
        }
        let (ours, oracle, sizes) = try Self.decodeBoth(blocks, tableSize: tableSize)
        #expect(ours == oracle)
        #expect(sizes.allSatisfy { $0 <= tableSize })
        if tableSize > 0 { #expect(sizes.contains { $0 > 0 }, "the blocks never used the dynamic table") }
    }

    @Test func decodesTheRequestsThisProjectsClientWrites() throws {
        let template = HTTP2NotificationTemplate(
            topic: "com.example.app", pushType: "alert", priority: 5, expiration: 0, collapseID: "c", payload: ByteBuffer(string: "{}")
        )
        var framer = HTTP2ClientFramer(authority: "api.push.apple.com", receiveWindow: 1 << 20)
        framer.start()
        var blocks: [ByteBuffer] = []
        for index in 0..<5 {
            let token = try DeviceToken(hex: String(repeating: "0\(index)", count: 32))
            framer.writeRequest(streamID: Int32(2 * index + 1), notification: HTTP2Notification(token: token, template: template), authorization: index < 3 ? "abc" : "def")
            var bytes = framer.take()!
            if index == 0 { bytes.moveReaderIndex(forwardBy: HTTP2Wire.preface.count) }
            for frame in Frames.split(bytes.readBytes(length: bytes.readableBytes)!) where frame.type == 0x1 {
                blocks.append(ByteBuffer(bytes: frame.payload))
            }
        }
        let (ours, oracle, _) = try Self.decodeBoth(blocks)
        #expect(ours == oracle)
        #expect(ours.count == 5)
        #expect(ours[4].contains(HTTP2HeaderField("authorization", "bearer def")))
        #expect(ours[4].contains(HTTP2HeaderField(":path", "/3/device/" + String(repeating: "04", count: 32))))
    }

    @Test(arguments: [
        ([0x80], "index 0"),
        ([0xBF], "beyond the dynamic table"),
        ([0x82, 0x3F, 0x01], "size update after a header field"),
        ([0x3F, 0xE2, 0x1F], "above the 4096 allowed"),
        ([0xFF], "integer cut off"),
        ([0x40, 0x05, 0x61], "string of 5 bytes"),
        ([0x40, 0x81, 0x61, 0x81, 0x61], "badly padded"),
        ([0x40, 0x84, 0xFF, 0xFF, 0xFF, 0xFF, 0x81, 0x61], "EOS"),
    ] as [([UInt8], String)])
    func rejectsBrokenBlocksWithACompressionError(_ block: [UInt8], _ expected: String) {
        var decoder = HPACKHeaderDecoder()
        var fields: [HTTP2HeaderField] = []
        #expect {
            _ = try decoder.decode(ByteBuffer(bytes: block), into: &fields)
        } throws: { error in
            guard let error = error as? HTTP2ConnectionError else { return false }
            return error.code == HTTP2Wire.ErrorCode.compressionError && error.reason.contains(expected)
        }
    }

    @Test func aSizeUpdateShrinksTheTableAndEvicts() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        try encoder.beginEncoding(allocator: ByteBufferAllocator())
        try encoder.append(headers: [("x-a", "1"), ("x-b", "2")] as [(String, String)])
        let first = try encoder.endEncoding()
        var decoder = HPACKHeaderDecoder()
        var fields: [HTTP2HeaderField] = []
        _ = try decoder.decode(first, into: &fields)
        #expect(decoder.size == 2 * (3 + 1 + 32))
        // A size update to 36 keeps only the newest entry, which index 62 then names.
        _ = try decoder.decode(ByteBuffer(bytes: [0x3F, 0x05, 0xBE]), into: &fields)
        #expect(decoder.size == 36)
        #expect(fields.last == HTTP2HeaderField("x-b", "2"))
    }
}
