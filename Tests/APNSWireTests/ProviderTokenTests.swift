import APNSWire
import Crypto
import Testing

@Suite struct ProviderTokenTests {
    @Test func signedTokenReadsBackAndVerifies() throws {
        let key = P256.Signing.PrivateKey()
        let token = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: 1_437_179_036, key: key)
        let parts = token.compact.split(separator: ".", omittingEmptySubsequences: false)
        #expect(parts.count == 3)
        #expect(!token.compact.contains("=") && !token.compact.contains("+") && !token.compact.contains("/"))
        // {"alg":"ES256","kid":"ABC123DEFG"} in base64url, exactly.
        #expect(parts[0] == "eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyM0RFRkcifQ")
        let read = try ProviderToken(parsing: token.compact)
        #expect(read.keyID == "ABC123DEFG")
        #expect(read.teamID == "DEF123GHIJ")
        #expect(read.issuedAt == 1_437_179_036)
        #expect(read.isSignatureValid(for: key.publicKey))
        #expect(!read.isSignatureValid(for: P256.Signing.PrivateKey().publicKey))
    }

    @Test func tamperedClaimsFailVerification() throws {
        let key = P256.Signing.PrivateKey()
        let token = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: 1_700_000_000, key: key)
        var parts = token.compact.split(separator: ".").map(String.init)
        let other = try ProviderToken.sign(keyID: "ABC123DEFG", teamID: "OTHERTEAM1", issuedAt: 1_700_000_000, key: key)
        parts[1] = String(other.compact.split(separator: ".")[1])
        let forged = try ProviderToken(parsing: parts.joined(separator: "."))
        #expect(forged.teamID == "OTHERTEAM1")
        #expect(!forged.isSignatureValid(for: key.publicKey))
    }

    @Test(arguments: [
        "", "a.b", "a.b.c.d",
        "eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJYIiwiaWF0IjoxfQ." + String(repeating: "A", count: 86),  // alg HS256
        "!!!.eyJpc3MiOiJYIiwiaWF0IjoxfQ." + String(repeating: "A", count: 86),
    ])
    func malformedTokensAreRefused(_ text: String) {
        #expect(throws: ProviderTokenError.self) { try ProviderToken(parsing: text) }
    }
}
