import PushFleetCore
import PushFleetRedis
import Testing

/// The packed form of a checkpoint's rejections, as one stream entry carries them.
@Suite struct RejectionPackTests {
    func token(_ byte: UInt8, count: Int = 32) throws -> DeviceToken {
        try DeviceToken(bytes: (0..<count).map { byte &+ UInt8(truncatingIfNeeded: $0) })
    }

    @Test func rejectionsComeBackInOrderWithTheirReasonsAndTimestamps() throws {
        let rejections = [
            Rejection(token: try self.token(1), reason: .badDeviceToken),
            Rejection(token: try self.token(2, count: 1), reason: .unregistered, timestampMilliseconds: 1_700_000_000_123),
            Rejection(token: try self.token(3, count: DeviceToken.maximumByteCount), reason: .unregistered, timestampMilliseconds: -5),
            Rejection(token: try self.token(4), reason: RejectionReason(""), timestampMilliseconds: Int64.max),
            Rejection(token: try self.token(5), reason: RejectionReason("Grüße 🔔"), timestampMilliseconds: Int64.min),
        ]
        let packed = RejectionPack.encode(rejections)
        #expect(packed.first == RejectionPack.version)
        #expect(RejectionPack.decode(packed) == rejections)
        #expect(RejectionPack.decode(RejectionPack.encode([])) == [])
    }

    @Test func aTruncatedOrForeignPackIsRefused() throws {
        let packed = RejectionPack.encode([Rejection(token: try self.token(1), reason: .badDeviceToken, timestampMilliseconds: 7)])
        for length in 2..<packed.count {  // the version byte alone is an empty pack
            #expect(RejectionPack.decode(Array(packed[0..<length])) == nil, "cut at \(length) of \(packed.count) bytes")
        }
        #expect(RejectionPack.decode([]) == nil)
        #expect(RejectionPack.decode([2] + packed.dropFirst()) == nil)
        // A zero-length token is no token.
        #expect(RejectionPack.decode([RejectionPack.version, 0, 0, 0] + [UInt8](repeating: 0, count: 8)) == nil)
    }

    @Test func aReasonLongerThanItsLengthFieldIsCutAtACharacterBoundary() throws {
        let long = String(repeating: "a", count: 65_534) + "€€"  // 65,540 bytes; the first € ends at 65,537
        let decoded = try #require(RejectionPack.decode(RejectionPack.encode([Rejection(token: try self.token(1), reason: RejectionReason(long))])))
        #expect(decoded.first?.reason == RejectionReason(String(repeating: "a", count: 65_534)))
    }
}
