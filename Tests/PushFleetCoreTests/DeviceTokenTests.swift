import PushFleetCore
import Testing

/// The 32-byte token used throughout, as lowercase hex without spaces.
private let tokenHex = "c9d4c07cfbbc26d6ef87a44d53e16998a3c4d8e1f0a2b3c4d5e6f708192a3b4c"

/// The same token's bytes, written out independently of the parser under test.
private let tokenBytes: [UInt8] = [
    0xC9, 0xD4, 0xC0, 0x7C, 0xFB, 0xBC, 0x26, 0xD6,
    0xEF, 0x87, 0xA4, 0x4D, 0x53, 0xE1, 0x69, 0x98,
    0xA3, 0xC4, 0xD8, 0xE1, 0xF0, 0xA2, 0xB3, 0xC4,
    0xD5, 0xE6, 0xF7, 0x08, 0x19, 0x2A, 0x3B, 0x4C,
]

/// `count` bytes that differ from each other and are never all zero.
private func sampleBytes(count: Int, seed: UInt8 = 1) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ Int(seed)) }
}

/// Independent hex encoding, so round trips are not checked against the code under test alone.
private func hex(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }.joined()
}

@Suite struct DeviceTokenTests {
    // MARK: - Parsing hex

    @Test func parsesLowercaseHex() throws {
        let token = try DeviceToken(hex: tokenHex)
        #expect(token.count == 32)
        #expect(token.bytes == tokenBytes)
    }

    @Test(arguments: [
        tokenHex.uppercased(),
        "C9d4C07cFBBC26d6eF87A44D53E16998a3C4D8E1F0A2B3C4D5E6F708192A3B4C",
    ])
    func parsesUppercaseAndMixedCaseHex(text: String) throws {
        let token = try DeviceToken(hex: text)
        let lowercase = try DeviceToken(hex: tokenHex)
        #expect(token.bytes == tokenBytes)
        #expect(token == lowercase)
        #expect(token.hexString == tokenHex, "hexString is always lowercase")
    }

    @Test(arguments: [
        // As Xcode logs print it: groups of eight digits.
        "c9d4c07c fbbc26d6 ef87a44d 53e16998 a3c4d8e1 f0a2b3c4 d5e6f708 192a3b4c",
        // Tabs, runs of spaces, leading and trailing white space.
        "  c9d4c07c\tfbbc26d6  ef87a44d\t\t53e16998 a3c4d8e1 f0a2b3c4 d5e6f708 192a3b4c  ",
        // Spaces between the two digits of a byte.
        "c 9 d 4 c07cfbbc26d6ef87a44d53e16998a3c4d8e1f0a2b3c4d5e6f708192a3b4c",
        // NSData's description: angle brackets around the groups.
        "<c9d4c07c fbbc26d6 ef87a44d 53e16998 a3c4d8e1 f0a2b3c4 d5e6f708 192a3b4c>",
        "<c9d4c07cfbbc26d6ef87a44d53e16998a3c4d8e1f0a2b3c4d5e6f708192a3b4c>",
        " < c9d4c07c fbbc26d6 ef87a44d 53e16998 a3c4d8e1 f0a2b3c4 d5e6f708 192a3b4c >",
    ])
    func acceptsSpacesTabsAndAngleBrackets(text: String) throws {
        let token = try DeviceToken(hex: text)
        #expect(token.bytes == tokenBytes)
    }

    @Test func parsesHexGivenAsUTF8BytesOfALongerLine() throws {
        // A token file line arrives as bytes; the token may be a slice that does not start at index 0.
        let line = Array("# comment\nc9d4 c07c".utf8)
        let slice = line[10...]
        let token = try DeviceToken(hexUTF8: slice)
        #expect(token.bytes == [0xC9, 0xD4, 0xC0, 0x7C])

        // Columns in errors count from the start of the slice, not of the line.
        let bad = Array("xxxxxxxx c9dz".utf8)[9...]
        let error = #expect(throws: DeviceTokenError.self) { try DeviceToken(hexUTF8: bad) }
        #expect(error?.code == .invalidCharacter)
        #expect(error?.message == "'z' at column 4 is not a hexadecimal digit")
    }

    /// Every byte in every place of a 32-byte token: a hexadecimal digit gives its value, any other
    /// byte (but the spaces and brackets the slow path allows) is refused at its column.
    @Test func eachByteIsADigitOrRefused() {
        let digits = Array("0123456789abcdefABCDEF".utf8)
        for byte in UInt8.min...UInt8.max where ![0x20, 0x09, UInt8(ascii: "<"), UInt8(ascii: ">")].contains(byte) {
            for place in 0..<64 {
                var text = Array(repeating: UInt8(ascii: "a"), count: 64)
                text[place] = byte
                let parsed = try? DeviceToken(hexUTF8: text)
                if let digit = digits.firstIndex(of: byte) {
                    let value = UInt8(digit < 16 ? digit : digit - 6)
                    let expected: UInt8 = place % 2 == 0 ? value << 4 | 0x0A : 0xA0 | value
                    #expect(parsed?.bytes[place / 2] == expected, "byte \(byte) at \(place)")
                } else {
                    #expect(parsed == nil, "byte \(byte) at \(place)")
                }
            }
        }
    }

    /// Random tokens of every length up to 32 bytes, in lower and upper case, read back as written.
    @Test func randomTokensReadBackInEitherCase() throws {
        var generator = SystemRandomNumberGenerator()
        for count in 1...32 {
            for _ in 0..<64 {
                let bytes = (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
                let hex = bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
                #expect(try DeviceToken(hex: hex).bytes == bytes, "\(hex)")
                #expect(try DeviceToken(hex: hex.uppercased()).bytes == bytes, "\(hex)")
                #expect(try DeviceToken(hex: hex).hexString == hex)
            }
        }
    }

    /// A token's bytes copied or appended are its bytes, at every length: inline ones (up to 32,
    /// 32 written word by word) and longer ones.
    @Test(arguments: [1, 2, 8, 31, 32, 33, 100, 255])
    func copiedAndAppendedBytesAreTheTokens(count: Int) throws {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
        let token = try DeviceToken(bytes: bytes)
        var copied = [UInt8](repeating: 0xEE, count: count + 4)
        let written = copied.withUnsafeMutableBytes { token.copyBytes(to: $0.baseAddress! + 2) }
        #expect(written == count)
        #expect(copied == [0xEE, 0xEE] + bytes + [0xEE, 0xEE], "nothing before or after is touched")
        var appended: [UInt8] = [7]
        token.appendBytes(to: &appended)
        #expect(appended == [7] + bytes)
    }

    @Test func parsesSubstrings() throws {
        let line = "token=\(tokenHex);"
        let text = line.dropFirst(6).dropLast()
        #expect(try DeviceToken(hex: text).bytes == tokenBytes)
    }

    // MARK: - Rejecting bad text

    @Test(arguments: [
        ("abc", 3),
        ("c9d4c07c fbbc26d", 15),
        ("<a>", 1),
    ])
    func rejectsAnOddNumberOfDigits(text: String, digits: Int) {
        let error = #expect(throws: DeviceTokenError.self) { try DeviceToken(hex: text) }
        #expect(error?.code == .oddDigitCount)
        #expect(error?.message == "the token has \(digits) hex digits; a token is whole bytes, so the count must be even")
    }

    @Test(arguments: [
        // text, message (columns count from 1 and include spaces and brackets)
        ("g0", "'g' at column 1 is not a hexadecimal digit"),
        ("c9d4 zz", "'z' at column 6 is not a hexadecimal digit"),
        ("<c9d4c07c fbbc26d6 0x12>", "'x' at column 21 is not a hexadecimal digit"),
        ("c9d4c07c-fbbc26d6", "'-' at column 9 is not a hexadecimal digit"),
        // Bytes that cannot be shown as themselves are written in hex.
        ("ab\u{7}c", "byte 0x7 at column 3 is not a hexadecimal digit"),
        ("abcd\r", "byte 0xd at column 5 is not a hexadecimal digit"),
        ("abcd\n", "byte 0xa at column 5 is not a hexadecimal digit"),
        // A non-ASCII character is reported at its first UTF-8 byte (é is C3 A9).
        ("abé0", "byte 0xc3 at column 3 is not a hexadecimal digit"),
        // '>' only closes the token when it is the last character; '<' only opens it.
        ("ab>cd", "'>' at column 3 is not a hexadecimal digit"),
        ("<abcd> ", "'>' at column 6 is not a hexadecimal digit"),
        ("ab<cd", "'<' at column 3 is not a hexadecimal digit"),
    ])
    func rejectsInvalidCharactersNamingTheColumn(text: String, message: String) {
        let error = #expect(throws: DeviceTokenError.self) { try DeviceToken(hex: text) }
        #expect(error?.code == .invalidCharacter)
        #expect(error?.message == message)
        #expect(error?.description == message)
    }

    @Test(arguments: ["", " ", "\t \t", "<>", "< >"])
    func rejectsTextWithoutDigitsAsEmpty(text: String) {
        let error = #expect(throws: DeviceTokenError.self) { try DeviceToken(hex: text) }
        #expect(error?.code == .empty)
        #expect(error?.message == "the token is empty")
    }

    @Test func rejectsEmptyBytes() {
        let error = #expect(throws: DeviceTokenError.self) { try DeviceToken(bytes: [UInt8]()) }
        #expect(error?.code == .empty)
    }

    @Test func acceptsUpToTheMaximumAndRejectsOneByteMore() throws {
        #expect(DeviceToken.maximumByteCount == 255)

        let longest = sampleBytes(count: 255)
        #expect(try DeviceToken(bytes: longest).bytes == longest)
        #expect(try DeviceToken(hex: hex(longest)).bytes == longest)

        let fromBytes = #expect(throws: DeviceTokenError.self) { try DeviceToken(bytes: sampleBytes(count: 256)) }
        #expect(fromBytes?.code == .tooLong)
        #expect(fromBytes?.message == "the token is 256 bytes; at most 255 are accepted")

        let fromHex = #expect(throws: DeviceTokenError.self) { try DeviceToken(hex: hex(sampleBytes(count: 300))) }
        #expect(fromHex?.code == .tooLong)
        #expect(fromHex?.message == "the token is 300 bytes; at most 255 are accepted")
    }

    @Test func errorsCompareByCodeOnly() {
        let odd = #expect(throws: DeviceTokenError.self) { try DeviceToken(hex: "abc") }
        let otherOdd = #expect(throws: DeviceTokenError.self) { try DeviceToken(hex: "abcde") }
        let invalid = #expect(throws: DeviceTokenError.self) { try DeviceToken(hex: "xy") }
        #expect(odd == otherOdd)
        #expect(odd != invalid)
        #expect(odd?.code.description == "oddDigitCount")
    }

    @Test func wrongSizeErrorNamesBothSizes() {
        let error = DeviceTokenError.wrongSize(byteCount: 8, required: 32, protocolName: "binary provider protocol")
        #expect(error.code == .wrongSize)
        #expect(
            error.message
                == "the token is 8 bytes (16 hex digits); the binary provider protocol requires exactly 32 bytes (64 hex digits)"
        )
    }

    // MARK: - Storage, equality, output

    /// 32 bytes and fewer are stored inline, longer tokens on the heap: both must behave the same.
    @Test(arguments: [1, 2, 8, 16, 31, 32, 33, 64, 100, 255])
    func roundTripsEveryLength(count: Int) throws {
        let bytes = sampleBytes(count: count)
        let token = try DeviceToken(bytes: bytes)
        #expect(token.count == count)
        #expect(token.bytes == bytes)
        #expect(token.withUnsafeBytes { Array($0) } == bytes)
        #expect(token.hexString == hex(bytes))
        #expect(token.description == hex(bytes))

        let reparsed = try DeviceToken(hex: token.hexString)
        #expect(reparsed == token)
        #expect(reparsed.hashValue == token.hashValue)
        #expect(try DeviceToken(hex: token.hexString.uppercased()) == token)
    }

    @Test(arguments: [8, 32, 33, 100])
    func equalContentIsEqualAndHashesEqual(count: Int) throws {
        let a = try DeviceToken(bytes: sampleBytes(count: count))
        let b = try DeviceToken(bytes: ArraySlice(sampleBytes(count: count)))
        let c = try DeviceToken(hex: hex(sampleBytes(count: count)))
        #expect(a == b)
        #expect(a == c)
        #expect(Set([a, b, c]).count == 1)

        var differentLastByte = sampleBytes(count: count)
        differentLastByte[count - 1] ^= 0xFF
        let d = try DeviceToken(bytes: differentLastByte)
        #expect(a != d)
        #expect(Set([a, d]).count == 2)
    }

    @Test func tokensDifferingOnlyInLengthAreDifferent() throws {
        // Inline storage pads with zeros: the count must keep [00] and [00 00] apart.
        let one = try DeviceToken(bytes: [0x00])
        let two = try DeviceToken(bytes: [0x00, 0x00])
        #expect(one != two)
        #expect(one.hexString == "00")
        #expect(two.hexString == "0000")

        // Across the inline/heap boundary: 32 bytes and the same 32 bytes plus a zero.
        let inline = try DeviceToken(bytes: tokenBytes)
        let heap = try DeviceToken(bytes: tokenBytes + [0x00])
        #expect(inline != heap)
        #expect(heap.count == 33)
        #expect(heap.hexString == tokenHex + "00")
        #expect(Set([one, two, inline, heap]).count == 4)
    }

    @Test func bytesAreExactForExtremeValues() throws {
        let allOnes = [UInt8](repeating: 0xFF, count: 32)
        #expect(try DeviceToken(bytes: allOnes).hexString == String(repeating: "ff", count: 32))
        let allZeros = [UInt8](repeating: 0x00, count: 40)
        #expect(try DeviceToken(bytes: allZeros).bytes == allZeros)
        #expect(try DeviceToken(hex: "00ff10").bytes == [0x00, 0xFF, 0x10])
    }

    @Test func binaryProtocolSizeIs32() {
        #expect(DeviceToken.binaryProtocolByteCount == 32)
    }

    /// Byte order, word by word for inline tokens, agrees with comparing the bytes in turn (a
    /// prefix first) for tokens of every length, inline and not, including ones that differ only
    /// in a zero byte at the end, in one byte anywhere, or from some word on (so that each word
    /// decides somewhere).
    @Test func byteOrderComparesTheBytesInTurnAPrefixFirst() throws {
        var generator = SystemRandomNumberGenerator()
        var samples: [[UInt8]] = [[0], [0, 0], [1], [1, 0], [1, 0, 0], [0xFF], Array(repeating: 0, count: 32), Array(repeating: 0, count: 33)]
        for length in 1...40 {
            for _ in 0..<3 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                samples.append(bytes)
                var longer = bytes
                longer.append(0)
                samples.append(longer)
                for position in [0, length / 2, length - 1] {
                    var changed = bytes
                    changed[position] &+= 1
                    samples.append(changed)
                }
                // The same first bytes up to a word's start, then fresh ones: that word decides,
                // by several differing bytes (one differing byte cannot tell byte orders apart).
                for start in stride(from: 0, to: length, by: 8) {
                    samples.append(Array(bytes[..<start]) + (start..<length).map { _ in UInt8.random(in: 0...255, using: &generator) })
                }
            }
        }
        let tokens = try samples.map { try DeviceToken(bytes: $0) }
        var wrong: [([UInt8], [UInt8])] = []
        for (a, aBytes) in zip(tokens, samples) {
            for (b, bBytes) in zip(tokens, samples) where a.precedesInByteOrder(b) != aBytes.lexicographicallyPrecedes(bBytes) {
                wrong.append((aBytes, bBytes))
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) pairs ordered wrongly, such as \(wrong.prefix(3))")
    }
}
