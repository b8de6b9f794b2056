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

    /// The batch lookup says what one lookup after another says, for every token of the batch
    /// (gaps, false positives, tokens sharing a slot, and a token given another's fingerprint
    /// included), in order.
    @Test func aBatchLookupSaysWhatSingleLookupsSay() {
        let refused = RefusedTokens(
            invalid: Set((0..<3_000).map { self.token($0 * 5) }), unregistered: Set((0..<3_000).map { self.token($0 * 5 + 1) })
        )
        var batch: [(token: DeviceToken, fingerprint: UInt64)?] = (0..<40_000).map { n in
            n % 9 == 4 ? nil : (self.token(n), self.token(n).fingerprint)
        }
        batch[7] = (self.token(7), self.token(10).fingerprint)
        var expected: [(Int, RefusedTokens.Refusal)] = []
        for (index, entry) in batch.enumerated() {
            if let entry, let refusal = refused.refusal(of: entry.token, fingerprint: entry.fingerprint) { expected.append((index, refusal)) }
        }
        var found: [(Int, RefusedTokens.Refusal)] = []
        batch.map { $0?.fingerprint ?? 0 }.withUnsafeBufferPointer { fingerprints in
            refused.refusals(fingerprints: fingerprints, token: { batch[$0]!.token }) { found.append(($0, $1)) }
        }
        #expect(found.count == expected.count)
        #expect(found.elementsEqual(expected) { $0.0 == $1.0 && $0.1 == $1.1 })
        // The refused ones: of the first 15,000, every fifth and the one after it, less the gaps.
        #expect(expected.map(\.0) == (0..<15_000).filter { $0 % 5 < 2 && $0 % 9 != 4 })
    }

    @Test func aTokenInSeveralSetsGetsInvalidThenUnregistered() {
        let refused = RefusedTokens(invalid: [self.token(1)], unregistered: [self.token(1), self.token(2)], otherTopic: [self.token(1), self.token(2), self.token(3)])
        #expect(refused.refusal(of: self.token(1), fingerprint: self.token(1).fingerprint) == .invalid)
        #expect(refused.refusal(of: self.token(2), fingerprint: self.token(2).fingerprint) == .unregistered)
        #expect(refused.refusal(of: self.token(3), fingerprint: self.token(3).fingerprint) == .otherTopic)
    }

    /// The table is addressed by fingerprint but decides by the token: a token that came with a
    /// refused token's fingerprint (two tokens may share one) is not refused for it.
    @Test func aTokenSharingARefusedTokensFingerprintIsNotRefused() {
        let refused = RefusedTokens(invalid: Set((0..<100).map { self.token($0) }), unregistered: [])
        for n in 0..<100 {
            #expect(refused.refusal(of: self.token(n + 1_000), fingerprint: self.token(n).fingerprint) == nil)
            #expect(refused.refusal(of: self.token(n), fingerprint: self.token(n).fingerprint) == .invalid)
        }
    }

    /// Tokens that share a fingerprint (every token's is 42 here) are told apart in the table:
    /// each is found with its own refusal, and a token that is not refused is not.
    @Test func tokensSharingAFingerprintAreToldApartInTheTable() {
        let refused = RefusedTokens(
            invalid: [self.token(1), self.token(2)], unregistered: [self.token(3), self.token(1)], otherTopic: [self.token(4)],
            fingerprint: { _ in 42 }
        )
        #expect(refused.refusal(of: self.token(1), fingerprint: 42) == .invalid)
        #expect(refused.refusal(of: self.token(2), fingerprint: 42) == .invalid)
        #expect(refused.refusal(of: self.token(3), fingerprint: 42) == .unregistered)
        #expect(refused.refusal(of: self.token(4), fingerprint: 42) == .otherTopic)
        #expect(refused.refusal(of: self.token(5), fingerprint: 42) == nil)
    }

    /// A batch entry without a token (fingerprint 0) is never looked up, even where the filter
    /// would let a fingerprint of 0 through and the first slot it names holds a token: the
    /// gateway's read has such entries for every frame that is not a request.
    @Test func anEntryWithoutATokenIsNeverLookedUp() throws {
        // A refused token whose filter bits let 0 through and whose slot is 0's: searched for.
        let refused = try #require((0..<100_000).lazy.map { n in (n, RefusedTokens(invalid: [self.token(n)], unregistered: [])) }.first { n, table in
            table.passes(0) && RefusedTokens.home(self.token(n).fingerprint, table.slotCount) == RefusedTokens.home(0, table.slotCount)
        })
        let fingerprints: [UInt64] = [0, self.token(refused.0).fingerprint, 0]
        var asked: [Int] = []
        var found: [Int] = []
        fingerprints.withUnsafeBufferPointer { buffer in
            refused.1.refusals(fingerprints: buffer, token: { asked.append($0); return self.token(refused.0) }) { index, _ in found.append(index) }
        }
        #expect(asked == [1])
        #expect(found == [1])
    }

    @Test func noRefusedTokensRefuseNothing() {
        let refused = RefusedTokens(invalid: [], unregistered: [])
        #expect(refused.isEmpty)
        #expect(refused.refusal(of: self.token(1), fingerprint: self.token(1).fingerprint) == nil)
    }
}
