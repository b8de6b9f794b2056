import APNSWire
import NIOCore
import PushFleetCore
import Testing

@Suite struct HTTP2VerdictTests {
    private func body(_ json: String) -> ByteBuffer { ByteBuffer(string: json) }

    @Test func twoHundredIsAccepted() {
        #expect(HTTP2Verdict.classify(status: 200, body: nil, apnsID: "EABE") == .accepted(apnsID: "EABE"))
    }

    @Test(arguments: [
        (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"), (400, "BadCollapseId"), (403, "BadCertificate"),
        (403, "Forbidden"), (403, "InvalidProviderToken"), (403, "MissingProviderToken"), (404, "BadPath"),
        (405, "MethodNotAllowed"), (413, "PayloadTooLarge"),
    ])
    func finalRejectionsKeepTheReason(status: Int, reason: String) {
        let verdict = HTTP2Verdict.classify(status: status, body: self.body(#"{"reason":"\#(reason)"}"#))
        #expect(verdict == .rejected(HTTP2Rejection(status: status, reason: RejectionReason(reason))))
    }

    @Test func unregisteredCarriesItsTimestamp() {
        let verdict = HTTP2Verdict.classify(status: 410, body: self.body(#"{"reason":"Unregistered","timestamp":1700000000123}"#))
        #expect(verdict == .rejected(HTTP2Rejection(status: 410, reason: .unregistered, timestamp: 1_700_000_000_123)))
    }

    @Test func unknownReasonIsKeptAsAPNsWroteIt() {
        let verdict = HTTP2Verdict.classify(status: 400, body: self.body(#"{"reason":"BadEnvironmentKeyIdInToken"}"#))
        #expect(verdict == .rejected(HTTP2Rejection(status: 400, reason: RejectionReason("BadEnvironmentKeyIdInToken"))))
    }

    @Test func missingOrBrokenBodyNamesTheStatus() {
        #expect(HTTP2Verdict.classify(status: 400, body: nil) == .rejected(HTTP2Rejection(status: 400, reason: RejectionReason("Status400"))))
        #expect(HTTP2Verdict.classify(status: 400, body: self.body("{oops")) == .rejected(HTTP2Rejection(status: 400, reason: RejectionReason("Status400"))))
    }

    @Test func tooManyRequestsBacksOffTheTokenOnly() {
        let verdict = HTTP2Verdict.classify(status: 429, body: self.body(#"{"reason":"TooManyRequests"}"#))
        #expect(verdict == .retryTokenLater(HTTP2Rejection(status: 429, reason: .tooManyRequests)))
    }

    @Test func serverErrorsAreRetried() {
        #expect(HTTP2Verdict.classify(status: 500, body: self.body(#"{"reason":"InternalServerError"}"#)) == .retry(HTTP2Rejection(status: 500, reason: .internalServerError)))
        #expect(HTTP2Verdict.classify(status: 503, body: self.body(#"{"reason":"ServiceUnavailable"}"#)) == .retry(HTTP2Rejection(status: 503, reason: .serviceUnavailable)))
        #expect(HTTP2Verdict.classify(status: 503, body: self.body(#"{"reason":"Shutdown"}"#)) == .retry(HTTP2Rejection(status: 503, reason: .shutdown)))
        #expect(HTTP2Verdict.classify(status: 502, body: nil) == .retry(HTTP2Rejection(status: 502, reason: RejectionReason("Status502"))))
    }

    @Test func expiredProviderTokenRenewsAndReplaces() {
        let verdict = HTTP2Verdict.classify(status: 403, body: self.body(#"{"reason":"ExpiredProviderToken"}"#))
        #expect(verdict == .renewProviderToken(HTTP2Rejection(status: 403, reason: .expiredProviderToken)))
    }

    @Test func connectionLevelAnswersReplaceTheConnection() {
        #expect(HTTP2Verdict.classify(status: 403, body: self.body(#"{"reason":"UnrelatedKeyIdInToken"}"#)) == .replaceConnection(HTTP2Rejection(status: 403, reason: .unrelatedKeyIdInToken)))
        #expect(HTTP2Verdict.classify(status: 429, body: self.body(#"{"reason":"TooManyProviderTokenUpdates"}"#)) == .replaceConnection(HTTP2Rejection(status: 429, reason: .tooManyProviderTokenUpdates)))
    }

    @Test func goAwayDebugDataReason() {
        #expect(HTTP2Rejection.goAwayReason(self.body(#"{"reason":"Shutdown"}"#)) == .shutdown)
        #expect(HTTP2Rejection.goAwayReason(nil) == nil)
        #expect(HTTP2Rejection.goAwayReason(self.body("not json")) == nil)
    }

    /// Which refusals pause a campaign (provider-level), and which of those heal by themselves (APNs
    /// failing) so that the coordinator resumes the campaign later.
    @Test(arguments: [
        (400, RejectionReason.badDeviceToken, false, false), (410, .unregistered, false, false), (400, .deviceTokenNotForTopic, false, false),
        (413, .payloadTooLarge, false, false),
        (403, .invalidProviderToken, true, false), (400, .topicDisallowed, true, false), (400, .badTopic, true, false),
        (403, .badCertificate, true, false),
        (429, .tooManyRequests, true, true), (500, .internalServerError, true, true), (503, .serviceUnavailable, true, true),
        (503, .shutdown, true, true),
    ])
    func providerLevelAndAPNsFailures(status: Int, reason: RejectionReason, providerLevel: Bool, apnsFailure: Bool) {
        let rejection = HTTP2Rejection(status: status, reason: reason)
        #expect(rejection.isProviderLevel == providerLevel)
        #expect(rejection.isAPNsFailure == apnsFailure)
    }

    /// APNs' own compact bodies are read without the JSON parser (`compact`); every other
    /// spelling goes to the parser. Both must read a body alike.
    @Test(arguments: [
        (#"{"reason":"BadDeviceToken"}"#, "BadDeviceToken", nil, true),
        (#"{"reason":"Unregistered","timestamp":1700000000123}"#, "Unregistered", 1_700_000_000_123, true),
        (#"{"reason":"Unregistered","timestamp":0}"#, "Unregistered", 0, true),
        (#"{"reason":"Unregistered","timestamp":100000000000000000}"#, "Unregistered", 100_000_000_000_000_000, true),
        (#"{"reason":"Unregistered","timestamp":1000000000000000000}"#, "Unregistered", 1_000_000_000_000_000_000, false),
        (#"{"reason":"Unregistered","timestamp":-1}"#, "Unregistered", -1, false),
        (#"{ "reason" : "Unregistered", "timestamp" : 1700000000123 }"#, "Unregistered", 1_700_000_000_123, false),
        (#"{"timestamp":1700000000123,"reason":"Unregistered"}"#, "Unregistered", 1_700_000_000_123, false),
        (#"{"reason":"Bad\u0044eviceToken"}"#, "BadDeviceToken", nil, false),
        (#"{"reason":"Bad\"Token"}"#, #"Bad"Token"#, nil, false),
        (#"{"reason":"Unregisteréd"}"#, "Unregisteréd", nil, false),
        (#"{"reason":"Unregistered","timestamp":12345678901234567890}"#, "Unregistered", nil, false),
        (#"{"reason":"Unregistered","timestamp":"1700000000123"}"#, "Unregistered", nil, false),
        (#"{"reason":"Unregistered","timestamp":1700000000123"#, "Status410", nil, false),
        (#"{"reason":"Unregistered","timestamp":017}"#, "Status410", nil, false),
        (#"{"reason":"Unregistered","timestamp":1}x"#, "Status410", nil, false),
        (#"{"reason":"Unregistered"} "#, "Unregistered", nil, false),
        (#"{"reason":"Unregistered"}x"#, "Status410", nil, false),
        (#"{"reason":""}"#, "Status410", nil, false),
        (#"{"reason":"Unregistered","timestamp":}"#, "Status410", nil, false),
    ] as [(String, String, Int64?, Bool)])
    func compactAndOtherBodiesReadAlike(body: String, reason: String, timestamp: Int64?, compact: Bool) {
        let bytes = self.body(body)
        #expect((bytes.withUnsafeReadableBytes(HTTP2Rejection.compactBody) != nil) == compact)
        let rejection = HTTP2Rejection(status: 410, body: bytes)
        #expect(rejection == HTTP2Rejection(status: 410, reason: RejectionReason(reason), timestamp: timestamp))
    }
}
