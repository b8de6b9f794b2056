import APNSWire
import PushFleetCore
import Testing

@Suite struct BinaryStatusTests {
    @Test(arguments: [
        (UInt8(0), "NoErrors"),
        (1, "ProcessingError"),
        (2, "MissingDeviceToken"),
        (3, "MissingTopic"),
        (4, "MissingPayload"),
        (5, "InvalidTokenSize"),
        (6, "InvalidTopicSize"),
        (7, "InvalidPayloadSize"),
        (8, "InvalidToken"),
        (10, "Shutdown"),
        (128, "ProtocolError"),
        (255, "Unknown"),
        // Codes Apple never documented are kept and named by number.
        (9, "Status9"),
        (11, "Status11"),
        (42, "Status42"),
        (127, "Status127"),
        (129, "Status129"),
        (254, "Status254"),
    ])
    func namesEveryStatus(rawValue: UInt8, name: String) {
        let status = BinaryStatus(rawValue: rawValue)
        #expect(status.reason.rawValue == name)
        #expect(status.description == "\(name) (\(rawValue))")
        #expect(status.rawValue == rawValue)
    }

    @Test func constantsHaveApplesCodes() {
        #expect(BinaryStatus.noErrors.rawValue == 0)
        #expect(BinaryStatus.processingError.rawValue == 1)
        #expect(BinaryStatus.missingDeviceToken.rawValue == 2)
        #expect(BinaryStatus.missingTopic.rawValue == 3)
        #expect(BinaryStatus.missingPayload.rawValue == 4)
        #expect(BinaryStatus.invalidTokenSize.rawValue == 5)
        #expect(BinaryStatus.invalidTopicSize.rawValue == 6)
        #expect(BinaryStatus.invalidPayloadSize.rawValue == 7)
        #expect(BinaryStatus.invalidToken.rawValue == 8)
        #expect(BinaryStatus.shutdown.rawValue == 10)
        #expect(BinaryStatus.protocolError.rawValue == 128)
        #expect(BinaryStatus.unknown.rawValue == 255)
        #expect(BinaryStatus.invalidToken.reason.rawValue == "InvalidToken")
        #expect(BinaryStatus.shutdown.reason.rawValue == "Shutdown")
        #expect(BinaryStatus.invalidPayloadSize.reason.rawValue == "InvalidPayloadSize")
    }

    @Test func onlyShutdownAndNoErrorsNameTheLastAcceptedNotification() {
        let lastAccepted = (0...255).map { BinaryStatus(rawValue: UInt8($0)) }.filter(\.identifiesLastAccepted)
        #expect(lastAccepted == [.noErrors, .shutdown])
    }

    @Test func statusesCompareByCode() {
        #expect(BinaryStatus(rawValue: 8) == .invalidToken)
        #expect(BinaryStatus(rawValue: 42) == BinaryStatus(rawValue: 42))
        #expect(BinaryStatus(rawValue: 42) != .unknown)
        #expect(Set((0...255).map { BinaryStatus(rawValue: UInt8($0)) }).count == 256)
    }
}
