import APNSWire
import Testing

@Suite struct HTTP2StreamWindowTests {
    @Test func oneStreamUntilTheFirstSettings() {
        var window = HTTP2StreamWindow<String>()
        #expect(window.room == 1)
        #expect(window.open("a", sentAt: 0) == 1)
        #expect(window.open("b", sentAt: 0) == nil)
        window.settingsReceived(maxConcurrentStreams: 3)
        #expect(window.room == 2)
        #expect(window.open("b", sentAt: 0) == 3)
        #expect(window.open("c", sentAt: 0) == 5)
        #expect(window.open("d", sentAt: 0) == nil)
        #expect(window.answered(3) == "b")
        #expect(window.open("d", sentAt: 0) == 7)
    }

    @Test func settingsWithoutTheLimitMeansTheLocalLimitFirstAndNoChangeLater() {
        var window = HTTP2StreamWindow<Int>(localLimit: 10)
        window.settingsReceived(maxConcurrentStreams: nil)
        #expect(window.limit == 10)
        window.settingsReceived(maxConcurrentStreams: 4)
        #expect(window.limit == 4)
        window.settingsReceived(maxConcurrentStreams: nil)
        #expect(window.limit == 4)
        window.settingsReceived(maxConcurrentStreams: 5000)
        #expect(window.limit == 10)
    }

    @Test func loweredLimitLetsOpenStreamsFinishButOpensNone() {
        var window = HTTP2StreamWindow<Int>()
        window.settingsReceived(maxConcurrentStreams: 3)
        for value in 0..<3 { #expect(window.open(value, sentAt: 0) != nil) }
        window.settingsReceived(maxConcurrentStreams: 1)
        #expect(window.room == 0)
        #expect(window.answered(1) == 0)
        #expect(window.room == 0)
        #expect(window.answered(5) == 2)
        #expect(window.room == 0)
        #expect(window.answered(3) == 1)
        #expect(window.room == 1)
    }

    @Test func answersInAnyOrderAndUnknownIDsAreIgnored() {
        var window = HTTP2StreamWindow<Int>()
        window.settingsReceived(maxConcurrentStreams: 10)
        for value in 0..<4 { _ = window.open(value, sentAt: UInt64(value)) }
        #expect(window.oldestSentAt == 0)
        #expect(window.answered(5) == 2)
        #expect(window.answered(5) == nil)
        #expect(window.answered(2) == nil)
        #expect(window.answered(99) == nil)
        #expect(window.answered(1) == 0)
        #expect(window.oldestSentAt == 1)
        #expect(window.answered(3) == 1)
        #expect(window.oldestSentAt == 3)
        #expect(window.count == 1)
        #expect(window.answered(7) == 3)
        #expect(window.isEmpty && window.oldestSentAt == nil)
        #expect(window.open(9, sentAt: 9) == 9)
        #expect(window.answered(9) == 9)
    }

    @Test func goAwayHandsBackTheStreamsAboveTheLastIDAndStopsOpening() {
        var window = HTTP2StreamWindow<Int>()
        window.settingsReceived(maxConcurrentStreams: 10)
        for value in 0..<5 { _ = window.open(value, sentAt: 0) }  // streams 1, 3, 5, 7, 9
        #expect(window.answered(7) == 3)
        #expect(window.goAwayReceived(lastStreamID: 3) == [2, 4])
        #expect(window.isDraining && window.room == 0)
        #expect(window.count == 2)
        #expect(window.answered(1) == 0)
        #expect(!window.isFinished)
        #expect(window.answered(3) == 1)
        #expect(window.isFinished)
    }

    @Test func goAwayAboveEveryStreamHandsBackNothing() {
        var window = HTTP2StreamWindow<Int>()
        _ = window.open(0, sentAt: 0)
        #expect(window.goAwayReceived(lastStreamID: .max) == [])
        #expect(window.count == 1 && window.room == 0)
    }

    @Test func connectionLossHandsBackEverythingInStreamOrder() {
        var window = HTTP2StreamWindow<Int>()
        window.settingsReceived(maxConcurrentStreams: 10)
        for value in 0..<4 { _ = window.open(value, sentAt: 0) }
        _ = window.answered(3)
        #expect(window.connectionLost() == [0, 2, 3])
        #expect(window.isEmpty && window.room == 0)
    }

    @Test func repeatedServerErrorsDrainTheConnection() {
        var window = HTTP2StreamWindow<Int>(serverErrorLimit: 3)
        #expect(!(window.serverErrorAnswered() as Bool))
        #expect(!(window.serverErrorAnswered() as Bool))
        window.answerWasNotServerError()
        #expect(!(window.serverErrorAnswered() as Bool))
        #expect(!(window.serverErrorAnswered() as Bool))
        #expect((window.serverErrorAnswered() as Bool))
        #expect(window.isDraining)
    }

    @Test func streamIDsRunOut() {
        var window = HTTP2StreamWindow<Int>(streamIDLimit: 5)
        window.settingsReceived(maxConcurrentStreams: 10)
        #expect(window.room == 3)
        #expect(window.open(0, sentAt: 0) == 1)
        #expect(window.open(1, sentAt: 0) == 3)
        #expect(!window.streamIDsRanOut)
        #expect(window.open(2, sentAt: 0) == 5)
        #expect(window.streamIDsRanOut)
        #expect(window.room == 0)
        #expect(window.open(3, sentAt: 0) == nil)
    }

    /// Ids are 31-bit and never wrap: a connection that used the last one drains, and its
    /// in-flight streams are still found by id.
    @Test func theLastStreamIDDrainsTheConnection() {
        var window = HTTP2StreamWindow<Int>(firstStreamID: .max - 4)
        window.settingsReceived(maxConcurrentStreams: 10)
        #expect(window.room == 3)
        #expect(window.open(0, sentAt: 0) == Int32.max - 4)
        #expect(window.open(1, sentAt: 0) == Int32.max - 2)
        #expect(!window.streamIDsRanOut)
        #expect(window.open(2, sentAt: 0) == Int32.max)
        #expect(window.streamIDsRanOut && window.isDraining)
        #expect(window.room == 0)
        #expect(window.open(3, sentAt: 0) == nil)
        #expect(window.goAwayReceived(lastStreamID: .max - 2) == [2])
        #expect(window.answered(.max - 2) == 1)
        #expect(window.connectionLost() == [0])
        #expect(window.isFinished)
    }

    @Test func drainStopsOpening() {
        var window = HTTP2StreamWindow<Int>()
        _ = window.open(0, sentAt: 0)
        window.drain()
        #expect(window.room == 0 && !window.isFinished)
        #expect(window.answered(1) == 0)
        #expect(window.isFinished)
    }
}
