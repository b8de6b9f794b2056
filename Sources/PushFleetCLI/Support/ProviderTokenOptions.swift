import APNSTransport
import ArgumentParser

/// Provider-token (JWT) authentication for the HTTP/2 provider API.
struct ProviderTokenOptions: ParsableArguments {
    @Option(help: "Signing key (.p8) for provider-token auth over HTTP/2.")
    var authKey: String?

    @Option(help: "Key ID of --auth-key (10 characters, from the developer account).")
    var keyId: String?

    @Option(help: "Team ID that owns --auth-key.")
    var teamId: String?

    func validate() throws {
        let given = [self.authKey, self.keyId, self.teamId].filter { $0 != nil }.count
        guard given == 0 || given == 3 else { throw ValidationError("--auth-key, --key-id and --team-id go together.") }
    }

    var isSet: Bool { self.authKey != nil }

    /// The process-wide signer: one token per team, shared by every connection.
    func signer() throws -> ProviderTokenSigner? {
        guard let path = self.authKey, let keyID = self.keyId, let teamID = self.teamId else { return nil }
        return try ProviderTokenSigner(keyPath: path, keyID: keyID, teamID: teamID)
    }
}
