import APNSWire
import Testing

struct HTTP2InboundWindowTests {
    @Test func aWindowAboveTheDefaultIsOpenedOnceAndReturnedAtHalf() {
        var window = HTTP2InboundWindow(target: 1 << 20)
        #expect(window.initialIncrement == (1 << 20) - 65_535)
        #expect(window.received(300_000) == nil)
        #expect(window.received(224_287) == nil)  // 524,287: one byte short of half
        #expect(window.received(1) == 524_288)
        #expect(window.unreturned == 0)
        #expect(window.received(40) == nil)
    }

    @Test func theDefaultWindowNeedsNoOpeningAndReturnsEveryHalf() {
        var window = HTTP2InboundWindow(target: HTTP2InboundWindow.protocolDefault)
        #expect(window.initialIncrement == nil)
        var returned = 0
        // 3,000 rejection bodies of 33 bytes: 99,000 bytes, more than the whole window.
        for _ in 0..<3_000 { returned += window.received(33) ?? 0 }
        #expect(returned + window.unreturned == 99_000)
        #expect(window.unreturned < 32_768)
        #expect(returned == 99_000 - window.unreturned)
    }

    @Test func emptyFramesReturnNothing() {
        var window = HTTP2InboundWindow(target: 2)
        #expect(window.received(0) == nil)
        #expect(window.received(1) == 1)
    }

    @Test func paddingCountsWithItsLengthOctet() {
        #expect(HTTP2InboundWindow.flowControlledLength(payload: 30, paddingBytes: nil) == 30)
        #expect(HTTP2InboundWindow.flowControlledLength(payload: 30, paddingBytes: 0) == 31)
        #expect(HTTP2InboundWindow.flowControlledLength(payload: 30, paddingBytes: 10) == 41)
    }
}
