import APNSWire
import Testing

/// Transcripts of one connection's window: frames written, then the gateway's answer (or silence).
@Suite struct BinarySendWindowTests {
    /// Writes `elements` with identifiers 1, 2, 3, …
    private func window(_ elements: [String]) -> BinarySendWindow<String> {
        var window = BinarySendWindow<String>()
        for (index, element) in elements.enumerated() {
            window.written(element, identifier: UInt32(index + 1))
        }
        return window
    }

    @Test func countsWhatWasWritten() {
        var window = BinarySendWindow<String>()
        #expect(window.isEmpty)
        window.written("a", identifier: 7)
        window.written("b", identifier: 8)
        #expect(window.count == 2)
        #expect(!window.isEmpty)
    }

    @Test func errorInTheMiddleAcceptsThePrefixRejectsOneAndResendsTheTail() {
        var window = self.window(["a", "b", "c", "d", "e"])
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 3))
        #expect(resolution.accepted == ["a", "b"])
        #expect(resolution.rejected == "c")
        #expect(resolution.resend == ["d", "e"])
        #expect(resolution.identifierMatched)
        #expect(window.isEmpty)  // the gateway closes after an error: nothing is left
    }

    @Test func errorOnTheFirstFrameAcceptsNothing() {
        var window = self.window(["a", "b"])
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidTokenSize, identifier: 1))
        #expect(resolution.accepted == [])
        #expect(resolution.rejected == "a")
        #expect(resolution.resend == ["b"])
    }

    @Test func errorOnTheLastFrameResendsNothing() {
        var window = self.window(["a", "b", "c"])
        let resolution = window.resolve(BinaryErrorResponse(status: .missingDeviceToken, identifier: 3))
        #expect(resolution.accepted == ["a", "b"])
        #expect(resolution.rejected == "c")
        #expect(resolution.resend == [])
    }

    @Test func shutdownNamesTheLastAcceptedFrame() {
        var window = self.window(["a", "b", "c", "d"])
        let resolution = window.resolve(BinaryErrorResponse(status: .shutdown, identifier: 2))
        #expect(resolution.accepted == ["a", "b"])
        #expect(resolution.rejected == nil)
        #expect(resolution.resend == ["c", "d"])
        #expect(resolution.identifierMatched)
    }

    @Test func unknownIdentifierResendsEverything() {
        var window = self.window(["a", "b", "c"])
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 99))
        #expect(resolution.accepted == [])
        #expect(resolution.rejected == nil)
        #expect(resolution.resend == ["a", "b", "c"])
        #expect(!resolution.identifierMatched)
        #expect(window.isEmpty)
    }

    @Test func identifiersNeedNotStartAtOne() {
        var window = BinarySendWindow<String>()
        window.written("a", identifier: UInt32.max - 1)
        window.written("b", identifier: UInt32.max)
        window.written("c", identifier: 1)  // wrapped
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 1))
        #expect(resolution.accepted == ["a", "b"])
        #expect(resolution.rejected == "c")
    }

    @Test func silentCloseReturnsEveryUnconfirmedFrameInOrder() {
        var window = self.window(["a", "b", "c"])
        #expect(window.connectionLost() == ["a", "b", "c"])
        #expect(window.isEmpty)
        #expect(window.connectionLost() == [])
    }

    @Test func sentinelRejectionConfirmsEverythingBeforeIt() {
        // The sender marks its sentinel frame with nil.
        var window = BinarySendWindow<String?>()
        window.written("a", identifier: 1)
        window.written("b", identifier: 2)
        window.written(nil, identifier: 3)
        let resolution = window.resolve(BinaryErrorResponse(status: .missingDeviceToken, identifier: 3))
        #expect(resolution.accepted == ["a", "b"])
        #expect(resolution.rejected == .some(nil))
        #expect(resolution.resend == [])
    }
}
