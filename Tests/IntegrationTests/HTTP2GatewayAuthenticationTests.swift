import APNSMockServer
import NIOCore
import NIOHTTP2
import PushFleetCore
import PushFleetTestSupport
import Testing

/// Provider tokens, client certificates and the stream limit of the simulator's HTTP/2 API.
@Suite struct HTTP2GatewayAuthenticationTests {
    typealias Fixture = HTTP2GatewayFixture

    private func send(_ client: RawHTTP2Client, token: Int = 1, authorization: String?) async throws -> RawHTTP2Client.Response {
        try await client.send(headers: Fixture.headers(token: TestTokens.token(token), authorization: authorization), body: Fixture.body)
    }

    /// Tokens the gateway rejects on a fresh connection.
    enum BadToken: String, CaseIterable, Sendable {
        case signedByAnotherKey, ofAnUnknownKey, issuedOverAnHourAgo

        func authorization(_ fixture: Fixture) throws -> String {
            switch self {
            case .signedByAnotherKey: try fixture.authorization(key: fixture.otherKey)
            case .ofAnUnknownKey: try fixture.authorization(keyID: "UNKNOWN999")
            case .issuedOverAnHourAgo: try fixture.authorization(issuedAt: fixture.clock.now / 1000 - 3601)
            }
        }

        var reason: String { self == .issuedOverAnHourAgo ? "ExpiredProviderToken" : "InvalidProviderToken" }
    }

    @Test(arguments: BadToken.allCases)
    func rejectsTheToken(_ token: BadToken) async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let response = try await self.send(client, authorization: try token.authorization(fixture))
        #expect(response.status == 403)
        #expect(response.reason == token.reason)
        #expect(fixture.ledger.snapshot().accepted == 0)
    }

    @Test func tokenOlderThanAnHourIsExpiredAndTheConnectionStaysExpired() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let first = try fixture.authorization()
        #expect(try await self.send(client, authorization: first).status == 200)
        fixture.clock.advance(minutes: 59)
        #expect(try await self.send(client, authorization: first).status == 200)
        fixture.clock.advance(minutes: 2)
        let expired = try await self.send(client, authorization: first)
        #expect(expired.status == 403)
        #expect(expired.reason == "ExpiredProviderToken")
        // A fresh token does not revive the connection: APNs keeps saying "expired".
        let fresh = try await self.send(client, authorization: try fixture.authorization())
        #expect(fresh.status == 403)
        #expect(fresh.reason == "ExpiredProviderToken")
        // A new connection with the fresh token works.
        let replacement = try await fixture.tokenClient()
        defer { Task { await replacement.close() } }
        #expect(try await self.send(replacement, authorization: try fixture.authorization()).status == 200)
        #expect(fixture.ledger.snapshot().accepted == 3)
        #expect(fixture.ledger.snapshot().rejected == ["ExpiredProviderToken": 2])
    }

    @Test func secondTeamOnOneConnectionIsInvalid() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        #expect(try await self.send(client, authorization: try fixture.authorization()).status == 200)
        let other = try fixture.authorization(keyID: Fixture.otherKeyID, teamID: Fixture.otherTeamID, key: fixture.otherKey)
        let response = try await self.send(client, authorization: other)
        #expect(response.status == 403)
        #expect(response.reason == "InvalidProviderToken")
        // The other team's token is valid on a connection of its own.
        let second = try await fixture.tokenClient()
        defer { Task { await second.close() } }
        #expect(try await self.send(second, authorization: other).status == 200)
    }

    @Test func anotherKeyOfTheTeamOnOneConnectionIsUnrelatedKeyIdInToken() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        #expect(try await self.send(client, authorization: try fixture.authorization()).status == 200)
        // Twenty minutes on, so that only the key, not the update rule, can be the objection.
        fixture.clock.advance(minutes: 21)
        let secondKey = try fixture.authorization(keyID: Fixture.secondKeyID, key: fixture.otherKey)
        let response = try await self.send(client, authorization: secondKey)
        #expect(response.status == 403)
        #expect(response.reason == "UnrelatedKeyIdInToken")
        // The second key is valid on a connection of its own.
        let second = try await fixture.tokenClient()
        defer { Task { await second.close() } }
        #expect(try await self.send(second, authorization: secondKey).status == 200)
        #expect(fixture.ledger.snapshot().rejected == ["UnrelatedKeyIdInToken": 1])
    }

    @Test func tokenChangeWithinTwentyMinutesIsTooManyProviderTokenUpdates() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient()
        defer { Task { await client.close() } }
        let first = try fixture.authorization()
        #expect(try await self.send(client, authorization: first).status == 200)
        fixture.clock.advance(minutes: 19)
        let second = try fixture.authorization()
        let tooSoon = try await self.send(client, authorization: second)
        #expect(tooSoon.status == 429)
        #expect(tooSoon.reason == "TooManyProviderTokenUpdates")
        #expect(try await self.send(client, authorization: first).status == 200)  // the current token still works
        fixture.clock.advance(minutes: 2)
        #expect(try await self.send(client, authorization: second).status == 200)
        #expect(fixture.ledger.snapshot().rejected == ["TooManyProviderTokenUpdates": 1])
    }

    @Test func clientCertificateOfTheCAAuthenticatesWithoutAToken() async throws {
        let fixture = try await Fixture.start(maxConcurrentStreams: 20)
        defer { Task { await fixture.stop() } }
        let client = try await fixture.certificateClient()
        defer { Task { await client.close() } }
        #expect(try await self.send(client, authorization: nil).status == 200)
        #expect(client.advertisedMaxConcurrentStreams == [1, 20])
        #expect(fixture.ledger.deliveries(of: TestTokens.token(1)) == 1)
    }

    @Test func clientCertificateOfAnotherCAIsRefused() async throws {
        let fixture = try await Fixture.start()
        defer { Task { await fixture.stop() } }
        let status: Int? = try? await {
            let client = try await fixture.certificateClient(rogue: true)
            defer { Task { await client.close() } }
            return try await self.send(client, authorization: nil).status
        }()
        #expect(status == nil)
        #expect(fixture.ledger.snapshot().accepted == 0)
    }

    @Test func oneStreamUntilARequestAuthenticatesThenTheConfiguredMaximum() async throws {
        let fixture = try await Fixture.start(maxConcurrentStreams: 8)
        defer { Task { await fixture.stop() } }
        let client = try await fixture.tokenClient(ignoreStreamLimit: true)
        defer { Task { await client.close() } }
        let authorization = try fixture.authorization()
        // Unauthenticated: the limit stays at one.
        let missing = try await self.send(client, authorization: nil)
        #expect(missing.reason == "MissingProviderToken")
        let held = try await client.open(headers: Fixture.headers(token: TestTokens.token(1), authorization: authorization))
        let refused = try await self.send(client, token: 2, authorization: authorization)
        #expect(refused.status == nil)
        #expect(refused.resetCode == .refusedStream)
        #expect(client.advertisedMaxConcurrentStreams == [1])
        // The held stream authenticates and raises the limit.
        held.finish(body: Fixture.body)
        #expect(try await held.response().status == 200)
        #expect(client.advertisedMaxConcurrentStreams == [1, 8])
        var streams: [RawHTTP2Client.Stream] = []
        for index in 10..<18 {
            streams.append(try await client.open(headers: Fixture.headers(token: TestTokens.token(index), authorization: authorization)))
        }
        let ninth = try await self.send(client, token: 30, authorization: authorization)
        #expect(ninth.resetCode == .refusedStream)
        for stream in streams { stream.finish(body: Fixture.body) }
        var statuses: [Int?] = []
        for stream in streams { statuses.append(try await stream.response().status) }
        #expect(statuses == Array(repeating: 200, count: 8))
        #expect(fixture.ledger.snapshot().accepted == 9)
        #expect(fixture.ledger.deliveries(of: TestTokens.token(2)) == 0)
    }
}
