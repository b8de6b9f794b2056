import PushFleetCore
import Testing

@Suite struct RejectionReasonTests {
    @Test(arguments: [
        // About the token: its outcome, and the registry may change its status.
        (RejectionReason.badDeviceToken, RejectionReason.Subject.token), (.deviceTokenNotForTopic, .token), (.unregistered, .token),
        (.expiredToken, .token), (.invalidToken, .token), (.missingDeviceToken, .token), (.invalidTokenSize, .token),
        // About the notification's own fields: the token's outcome all the same.
        (.payloadTooLarge, .notification), (.badCollapseId, .notification), (.badPriority, .notification),
        (.invalidPayloadSize, .notification), (.protocolError, .notification),
        // About the provider: pauses a campaign.
        (.badTopic, .provider), (.topicDisallowed, .provider), (.invalidProviderToken, .provider),
        (.badCertificateEnvironment, .provider), (.missingTopic, .provider), (.invalidTopicSize, .provider),
        // About APNs itself.
        (.serviceUnavailable, .apns), (.internalServerError, .apns), (.shutdown, .apns), (.tooManyRequests, .apns),
        (.processingError, .apns),
    ])
    func eachKnownReasonKnowsWhatItIsAbout(_ reason: RejectionReason, _ subject: RejectionReason.Subject) {
        #expect(reason.subject == subject)
    }

    @Test func anUnknownReasonIsKeptAsAPNsWroteIt() {
        let reason = RejectionReason("BadEnvironmentKeyIdInToken")
        #expect(reason.rawValue == "BadEnvironmentKeyIdInToken")
        #expect(reason.description == "BadEnvironmentKeyIdInToken")
        #expect(reason.subject == .unknown)
        #expect(RejectionReason("BadDeviceToken") == .badDeviceToken)
        #expect(RejectionReason("baddevicetoken") != .badDeviceToken)
    }
}
