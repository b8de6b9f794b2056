import APNSWire
import NIOCore
import NIOHPACK
import PushFleetCore
import Testing

/// The request encoder against NIOHPACK's decoder, an HPACK implementation of its own, kept in
/// step block after block as a server's would be.
@Suite struct HPACKRequestEncoderTests {
    static let template = HTTP2NotificationTemplate(
        topic: "com.example.app", pushType: "alert", priority: 10, expiration: 0, collapseID: "sale", payload: ByteBuffer(string: #"{"aps":{}}"#)
    )

    static func tokens(_ count: Int) -> [DeviceToken] {
        (0..<count).map { _ in try! DeviceToken(bytes: (0..<32).map { _ in UInt8.random(in: 0...255) }) }
    }

    static func expected(_ token: DeviceToken, _ template: HTTP2NotificationTemplate = template, authorization: String? = nil) -> [String] {
        var fields = [":path: /3/device/\(token.hexString)", ":method: POST", ":scheme: https", ":authority: api.push.apple.com"]
        fields += template.headers.map { "\($0.name): \($0.value)" }
        if let authorization { fields.append("authorization: bearer \(authorization)") }
        return fields
    }

    static func decode(_ decoder: inout HPACKDecoder, _ block: ByteBuffer) throws -> [String] {
        var block = block
        let headers = try decoder.decodeHeaders(from: &block)
        return headers.map { "\($0.name): \($0.value)" }
    }

    @Test func afterTheFirstRequestOnlyThePathIsWrittenOut() throws {
        var encoder = HPACKRequestEncoder(authority: "api.push.apple.com")
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let tokens = Self.tokens(50)
        var sizes: [Int] = []
        for token in tokens {
            var block = ByteBuffer()
            encoder.writeBlock(for: token, template: Self.template, authorization: "jwt.jwt.jwt", into: &block)
            sizes.append(block.readableBytes)
            #expect(try Self.decode(&decoder, block) == Self.expected(token, authorization: "jwt.jwt.jwt"))
        }
        // `:path`: 1 + 1 + 10 + 64 bytes; then one byte per field: 3 pseudo-headers, 6 headers,
        // authorization.
        #expect(sizes.dropFirst().allSatisfy { $0 == 76 + 10 }, "\(sizes)")
        #expect(sizes[0] > 200)
    }

    @Test func aNewProviderTokenOrTemplateIsEnteredAndTheTableStaysInStep() throws {
        var encoder = HPACKRequestEncoder(authority: "api.push.apple.com")
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let other = HTTP2NotificationTemplate(topic: "com.example.other.voip", pushType: "voip", payload: ByteBuffer(string: #"{"x":1}"#))
        // Provider tokens of a realistic size: the table overflows and evicts as they change.
        let jwt = { (n: Int) in String(repeating: "e", count: 36) + "." + String(repeating: "c", count: 60) + ".\(n)" + String(repeating: "s", count: 84) }
        for (index, token) in Self.tokens(400).enumerated() {
            let template = index % 3 == 0 ? other : Self.template
            let authorization = jwt(index / 25)
            var block = ByteBuffer()
            encoder.writeBlock(for: token, template: template, authorization: authorization, into: &block)
            #expect(try Self.decode(&decoder, block) == Self.expected(token, template, authorization: authorization), "request \(index)")
        }
    }

    /// A server that allows less table than the fields need gets them as literals, never entered;
    /// one that allows none gets the size update first.
    @Test(arguments: [0, 100, 300, 8_192])
    func aSmallerTableThePeerAllowsIsSignalledAndRespected(size: Int) throws {
        var encoder = HPACKRequestEncoder(authority: "api.push.apple.com")
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        let tokens = Self.tokens(20)
        var block = ByteBuffer()
        encoder.writeBlock(for: tokens[0], template: Self.template, authorization: nil, into: &block)
        #expect(try Self.decode(&decoder, block) == Self.expected(tokens[0]))
        encoder.peerAllows(headerTableSize: size)
        decoder.maxDynamicTableLength = size
        for token in tokens.dropFirst() {
            block.clear()
            encoder.writeBlock(for: token, template: Self.template, authorization: nil, into: &block)
            #expect(try Self.decode(&decoder, block) == Self.expected(token))
        }
        #expect(encoder.maximumSize == min(size, 4_096))
    }
}
