@testable import APNSMockServer
import PushFleetCore
import PushFleetTestSupport
import Testing

/// The simulator's table of refused tokens: the filter only rules tokens out, the table decides.
@Suite struct RefusedTokensTests {
    private func token(_ n: Int) -> DeviceToken { TestTokens.token(n) }

    @Test func everyRefusedTokenIsFoundAndNoOtherAmongManyLookups() {
        // 3,000 refused among 200,000: the filter lets some valid tokens through (false
        // positives); each must still come back as not refused.
        let invalid = Set((0..<1_000).map { self.token($0 * 7) })
        let unregistered = Set((0..<1_000).map { self.token($0 * 7 + 1) })
        let otherTopic = Set((0..<1_000).map { self.token($0 * 7 + 2) })
        let refused = RefusedTokens(invalid: invalid, unregistered: unregistered, otherTopic: otherTopic)
        #expect(!refused.isEmpty)
        var found: [RefusedTokens.Refusal: Int] = [:]
        for n in 0..<200_000 {
            let token = self.token(n)
            if let refusal = refused.refusal(of: token, fingerprint: token.fingerprint) { found[refusal, default: 0] += 1 }
        }
        #expect(found == [.invalid: 1_000, .unregistered: 1_000, .otherTopic: 1_000])
        for token in unregistered { #expect(refused.refusal(of: token, fingerprint: token.fingerprint) == .unregistered) }
    }

    @Test func aTokenInSeveralSetsGetsInvalidThenUnregistered() {
        let refused = RefusedTokens(invalid: [self.token(1)], unregistered: [self.token(1), self.token(2)], otherTopic: [self.token(1), self.token(2), self.token(3)])
        #expect(refused.refusal(of: self.token(1), fingerprint: self.token(1).fingerprint) == .invalid)
        #expect(refused.refusal(of: self.token(2), fingerprint: self.token(2).fingerprint) == .unregistered)
        #expect(refused.refusal(of: self.token(3), fingerprint: self.token(3).fingerprint) == .otherTopic)
    }

    @Test func noRefusedTokensRefuseNothing() {
        let refused = RefusedTokens(invalid: [], unregistered: [])
        #expect(refused.isEmpty)
        #expect(refused.refusal(of: self.token(1), fingerprint: self.token(1).fingerprint) == nil)
    }
}
