@testable import APNSWire
import NIOCore
import NIOHPACK
import Testing

/// The answer decoder against NIOHPACK's encoder, an HPACK implementation of its own: whatever a
/// server's encoder does with its dynamic table and Huffman coding, `:status` comes out right.
@Suite struct HPACKAnswerDecoderTests {
    private static func uuid() -> String {
        (0..<16).map { _ in String(UInt8.random(in: 0...255), radix: 16) }.joined(separator: "-")
    }

    private static func encode(_ encoder: inout HPACKEncoder, _ headers: [(String, String)]) throws -> ByteBuffer {
        try encoder.beginEncoding(allocator: ByteBufferAllocator())
        try encoder.append(headers: headers)
        return try encoder.endEncoding()
    }

    static let statuses = [200, 204, 400, 403, 404, 405, 410, 413, 429, 500, 503]

    @Test(arguments: [true, false], [4_096, 256, 0])
    func everyStatusComesOutWhateverTheServersTableAndCoding(huffman: Bool, tableSize: Int) throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: huffman, maxDynamicTableSize: 4_096)
        var decoder = HPACKAnswerDecoder()
        if tableSize != 4_096 {
            try encoder.setDynamicTableSize(tableSize)
        }
        for index in 0..<2_000 {
            let status = Self.statuses[index % Self.statuses.count]
            var headers = [(":status", String(status)), ("apns-id", Self.uuid())]
            if index % 3 == 0 { headers.append(("apns-unique-id", Self.uuid())) }
            if index % 7 == 0 { headers.append(("x-filler-\(index % 5)", String(repeating: "v", count: index % 90))) }
            let block = try Self.encode(&encoder, headers)
            #expect(try decoder.status(of: block) == status, "answer \(index)")
            #expect(decoder.size == encoder.dynamicTableSize, "answer \(index)")
        }
        #expect(decoder.maximumSize == tableSize)
    }

    /// NIOHPACK indexes `:status 410` on first use and names it by dynamic index after: the
    /// decoder's table keeps entries' places and sizes through evictions.
    @Test func statusesReferencedInTheDynamicTableSurviveEvictions() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: true, maxDynamicTableSize: 4_096)
        var decoder = HPACKAnswerDecoder()
        var sawIndexedDynamic = false
        for index in 0..<500 {
            let status = [410, 429, 403][index % 3]
            // Large fillers evict the status entries every few blocks.
            let block = try Self.encode(&encoder, [(":status", String(status)), ("x-big", String(repeating: "é", count: (index * 37) % 700))])
            if let first = block.getInteger(at: block.readerIndex, as: UInt8.self), first & 0x80 != 0, first & 0x7F >= 62 { sawIndexedDynamic = true }
            #expect(try decoder.status(of: block) == status, "answer \(index)")
            #expect(decoder.size == encoder.dynamicTableSize, "answer \(index)")
        }
        #expect(sawIndexedDynamic)
    }

    @Test func aBlockWithoutStatusHasNone() throws {
        var encoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var decoder = HPACKAnswerDecoder()
        #expect(try decoder.status(of: Self.encode(&encoder, [("apns-id", "x")])) == nil)
        #expect(try decoder.status(of: ByteBuffer()) == nil)
        // A status that is not three digits is -1, not a guess.
        #expect(try decoder.status(of: Self.encode(&encoder, [(":status", "2x0")])) == -1)
    }

    @Test func theSizeUpdateFollowsTheAnnouncedSettings() throws {
        var decoder = HPACKAnswerDecoder()
        // Before the acknowledgement, up to the 4,096 bytes of the protocol's default.
        #expect(try decoder.status(of: ByteBuffer(bytes: [0x3F, 0xE1, 0x1F, 0x88])) == 200)  // update to 4,096
        decoder.allowedMaximumSize = 0
        #expect(throws: HTTP2ConnectionError.self) { try decoder.status(of: ByteBuffer(bytes: [0x3F, 0x01, 0x88])) }  // to 32
        #expect(try decoder.status(of: ByteBuffer(bytes: [0x20, 0x88])) == 200)
        #expect(decoder.maximumSize == 0)
    }

    @Test(arguments: [
        ([0x80] as [UInt8], "index 0"),
        ([0xBE], "index 62 beyond"),
        ([0x88, 0x20], "after a header field"),
        ([0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F], "above 2^28"),
        ([0xFF, 0x80], "cut off"),
        ([0x40, 0x05, 0x61], "a string of 5 bytes with 1 left"),
        ([0x40], "missing"),
        // `:status` with a Huffman value of one symbol '0' (00000) and three zero bits of padding.
        ([0x48, 0x81, 0x00], "badly padded"),
        // A Huffman value of two 0xFF bytes and more: EOS's 30 ones inside the string.
        ([0x48, 0x84, 0xFF, 0xFF, 0xFF, 0xFF], "EOS"),
        // A Huffman value of a whole byte of ones: padding longer than 7 bits.
        ([0x48, 0x81, 0xFF], "badly padded"),
    ])
    func brokenBlocksAreCompressionErrors(bytes: [UInt8], reason: String) {
        var decoder = HPACKAnswerDecoder()
        do {
            _ = try decoder.status(of: ByteBuffer(bytes: bytes))
            Issue.record("no error for \(bytes)")
        } catch {
            #expect(error.code == HTTP2Wire.ErrorCode.compressionError)
            #expect(error.reason.contains(reason), "\(error)")
        }
    }

    /// Found by FuzzHTTP2Answer: a Huffman string the answer decoder has no use for is skipped by
    /// its length, so its padding is not checked, while the full decoder refuses it. Nothing is
    /// read from it; the answer's `:status` is right either way.
    @Test func aSkippedHuffmanStringIsNotCheckedForPadding() throws {
        // `:status 200`, then a literal field named `x` whose value is Huffman '0' with zero padding
        // bits (the name is read, to know the field; the value of a field it does not need is not).
        let block: [UInt8] = [0x88, 0x00, 0x01, 0x78, 0x81, 0x00]
        var answers = HPACKAnswerDecoder()
        #expect(try answers.status(of: ByteBuffer(bytes: block)) == 200)
        var headers = HPACKHeaderDecoder()
        var fields: [HTTP2HeaderField] = []
        #expect(throws: HTTP2ConnectionError.self) { _ = try headers.decode(ByteBuffer(bytes: block), into: &fields) }
    }
}

/// The Huffman code against NIOHPACK's encoder: every byte of valid UTF-8 (which NIOHPACK's
/// string-typed API can take) decodes back; the table itself is a complete prefix code.
@Suite struct HPACKHuffmanTests {
    @Test func textCodedByAnotherEncoderDecodesBack() throws {
        func text(_ range: ClosedRange<UInt32>, every step: UInt32) -> String {
            var text = ""
            for value in stride(from: range.lowerBound, through: range.upperBound, by: Int(step)) {
                if let scalar = UnicodeScalar(value) { text.unicodeScalars.append(scalar) }
            }
            return text
        }
        let samples: [String] = [
            text(0...127, every: 1), text(0x80...0x7FF, every: 1), text(0x800...0xFFFF, every: 97),
            text(0x10000...0x10FFFF, every: 4_099), "é中😀 ÿ€ß ǅ", "", "a", "/3/device/00ff",
        ]
        for sample in samples {
            var encoder = HPACKEncoder(allocator: ByteBufferAllocator(), useHuffmanEncoding: true)
            try encoder.beginEncoding(allocator: ByteBufferAllocator())
            try encoder.appendNonIndexed(header: "x", value: sample)
            var block = try encoder.endEncoding()
            // 0x00, then the name "x" (Huffman: 1 byte), then the value.
            block.moveReaderIndex(forwardBy: 3)
            let first = block.readInteger(as: UInt8.self)!
            var length = Int(first & 0x7F)
            if length == 127 {
                var shift = 0
                while let byte = block.readInteger(as: UInt8.self) {
                    length += Int(byte & 0x7F) << shift
                    shift += 7
                    if byte & 0x80 == 0 { break }
                }
            }
            #expect(first & 0x80 != 0)
            var decoded: [UInt8] = []
            try block.readSlice(length: length)!.withUnsafeReadableBytes { raw in try HPACKHuffman.decode(raw) { decoded.append($0) } }
            #expect(decoded == Array(sample.utf8))
        }
    }

    @Test func theTableIsACompletePrefixCodeWithEOSAllOnes() {
        #expect(HPACKHuffman.codes.count == 257)
        // Kraft: the code lengths of a complete prefix code sum to exactly 1 (in units of 2^-30).
        let sum = HPACKHuffman.codes.reduce(0) { $0 + (1 << (30 - Int($1.length))) }
        #expect(sum == 1 << 30)
        #expect(HPACKHuffman.codes[256].code == (1 << 30) - 1 && HPACKHuffman.codes[256].length == 30)
        let distinct = Set(HPACKHuffman.codes.map { "\($0.length):\($0.code)" })
        #expect(distinct.count == 257)
    }
}
