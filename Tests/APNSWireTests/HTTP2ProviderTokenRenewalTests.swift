import APNSWire
import Testing

@Suite struct HTTP2ProviderTokenRenewalTests {
    @Test func intervalIsKeptBetweenTwentyAndSixtyMinutes() {
        #expect(ProviderTokenRenewal().interval == 3000)
        #expect(ProviderTokenRenewal(interval: 60).interval == 1200)
        #expect(ProviderTokenRenewal(interval: 10_000).interval == 3600)
        #expect(ProviderTokenRenewal(interval: 1800).interval == 1800)
    }

    @Test func renewsWhenNoneOrDue() {
        var renewal = ProviderTokenRenewal()
        #expect(renewal.needsToken(now: 1_000))
        renewal.signed(issuedAt: 1_000)
        #expect(!renewal.needsToken(now: 1_000))
        #expect(!renewal.needsToken(now: 3_999))
        #expect(renewal.needsToken(now: 4_000))
    }

    @Test func expiredRenewsOnceForTheCurrentTokenOnly() {
        var renewal = ProviderTokenRenewal()
        renewal.signed(issuedAt: 1_000)
        #expect((renewal.expiredReported(tokenIssuedAt: 1_000, now: 1_100) as Bool))
        renewal.signed(issuedAt: 1_100)
        // Other streams report the same expired token: already replaced.
        #expect(!(renewal.expiredReported(tokenIssuedAt: 1_000, now: 1_101) as Bool))
        // The new token reported expired within 20 minutes: no second early renewal.
        #expect(!(renewal.expiredReported(tokenIssuedAt: 1_100, now: 1_200) as Bool))
        #expect((renewal.expiredReported(tokenIssuedAt: 1_100, now: 1_100 + 1_200) as Bool))
    }
}
