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

    @Test(arguments: [
        BinaryStatus.processingError, .missingDeviceToken, .missingPayload, .invalidTokenSize,
        .invalidPayloadSize, .invalidToken, .protocolError, .unknown, BinaryStatus(rawValue: 42),
    ])
    func everyFailureStatusRejectsTheNamedFrame(status: BinaryStatus) {
        var window = self.window(["a", "b", "c"])
        let resolution = window.resolve(BinaryErrorResponse(status: status, identifier: 2))
        #expect(resolution.accepted == ["a"])
        #expect(resolution.rejected == "b")
        #expect(resolution.resend == ["c"])
        #expect(resolution.identifierMatched)
    }

    @Test func shutdownNamingTheLastFrameAcceptsEverything() {
        var window = self.window(["a", "b"])
        let resolution = window.resolve(BinaryErrorResponse(status: .shutdown, identifier: 2))
        #expect(resolution.accepted == ["a", "b"])
        #expect(resolution.rejected == nil)
        #expect(resolution.resend == [])
        #expect(resolution.identifierMatched)
    }

    @Test func noErrorsStatusIsReadLikeShutdown() {
        var window = self.window(["a", "b", "c"])
        let resolution = window.resolve(BinaryErrorResponse(status: .noErrors, identifier: 1))
        #expect(resolution.accepted == ["a"])
        #expect(resolution.rejected == nil)
        #expect(resolution.resend == ["b", "c"])
    }

    @Test func shutdownWithAnUnknownIdentifierResendsEverything() {
        var window = self.window(["a", "b"])
        let resolution = window.resolve(BinaryErrorResponse(status: .shutdown, identifier: 0))
        #expect(resolution.accepted == [])
        #expect(resolution.rejected == nil)
        #expect(resolution.resend == ["a", "b"])
        #expect(!resolution.identifierMatched)
    }

    @Test func errorOnAnEmptyWindowMatchesNothing() {
        var window = BinarySendWindow<String>()
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 0))
        #expect(resolution.accepted == [])
        #expect(resolution.rejected == nil)
        #expect(resolution.resend == [])
        #expect(!resolution.identifierMatched)
    }

    @Test func duplicateIdentifiersResolveAtTheFirst() {
        // After 2^32 frames on one connection identifiers repeat; the oldest frame is the one the gateway saw first.
        var window = BinarySendWindow<String>()
        window.written("a", identifier: 5)
        window.written("b", identifier: 6)
        window.written("c", identifier: 5)
        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 5))
        #expect(resolution.accepted == [])
        #expect(resolution.rejected == "a")
        #expect(resolution.resend == ["b", "c"])
    }

    @Test func windowIsReusableForTheNextConnection() {
        var window = self.window(["a", "b", "c"])
        let first = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 2))
        #expect(first.resend == ["c"])

        // The tail goes out again on a fresh connection, with new identifiers.
        window.written("c", identifier: 10)
        window.written("d", identifier: 11)
        #expect(window.count == 2)

        // A window is a value: resolving a copy leaves the original untouched.
        var copy = window
        let stale = copy.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 2))
        #expect(!stale.identifierMatched, "identifiers of the previous connection no longer match")
        #expect(copy.isEmpty)
        #expect(window.count == 2)
        #expect(window.connectionLost() == ["c", "d"])
    }

    @Test func resolutionsCompareAsValues() {
        var first = self.window(["a", "b", "c"])
        var second = self.window(["a", "b", "c"])
        var third = self.window(["a", "b", "c"])
        let one = first.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 2))
        let two = second.resolve(BinaryErrorResponse(status: .missingPayload, identifier: 2))
        let three = third.resolve(BinaryErrorResponse(status: .shutdown, identifier: 2))
        #expect(one == two, "the resolution does not carry the status")
        #expect(one != three)
    }

    @Test func batchOf100WithAnErrorAt37AndASentinelBehind() {
        // 100 notifications, then the sentinel (nil); the gateway rejects frame 37 and drops the rest.
        var window = BinarySendWindow<Int?>()
        for n in 1...100 { window.written(n, identifier: UInt32(1_000 + n)) }
        window.written(nil, identifier: 1_101)
        #expect(window.count == 101)

        let resolution = window.resolve(BinaryErrorResponse(status: .invalidToken, identifier: 1_037))
        #expect(resolution.accepted == Array(1...36))
        #expect(resolution.rejected == .some(37))
        #expect(resolution.resend == Array(38...100) + [nil])
        // Nothing lost, nothing counted twice.
        #expect(resolution.accepted.count + 1 + resolution.resend.compactMap { $0 }.count == 100)
        #expect(window.isEmpty)
    }

    @Test func silentCloseAfterTheSentinelReturnsItToo() {
        var window = BinarySendWindow<Int?>()
        window.written(1, identifier: 1)
        window.written(nil, identifier: 2)
        #expect(window.connectionLost() == [1, nil])
    }
}
