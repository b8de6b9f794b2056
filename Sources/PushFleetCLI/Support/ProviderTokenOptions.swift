import APNSTransport
import ArgumentParser
import PushFleetCore

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

extension ProviderTokenOptions {
    /// Checks that `protocol` (binary or http2) has the credentials it takes: a client certificate
    /// for the binary protocol; for HTTP/2, a provider token or a certificate, not both.
    func validate(protocol: DeliveryProtocol, tls: TLSOptions) throws {
        if `protocol` == .binary {
            guard tls.hasIdentity else { throw ValidationError("the binary protocol needs a client certificate: --cert and --key, or --p12") }
            guard !self.isSet else { throw ValidationError("the binary protocol has no provider tokens; use --cert and --key, or --p12") }
        } else {
            guard tls.hasIdentity != self.isSet else {
                throw ValidationError("HTTP/2 needs one of: --auth-key with --key-id and --team-id, or --cert and --key, or --p12")
            }
        }
    }

    /// HTTP/2's TLS and authentication: a provider token over TLS without a client certificate,
    /// or the client certificate. The credentials are loaded here, so a missing or wrong file stops
    /// the command at start.
    func http2Credentials(tls: TLSOptions) throws -> (ClientTLS, HTTP2Sender.Configuration.Authentication) {
        let credentials: (ClientTLS, HTTP2Sender.Configuration.Authentication)
        if let signer = try self.signer() {
            credentials = (.noClientCertificate(trusting: tls.ca), .providerToken(signer))
        } else {
            credentials = (try tls.clientTLS(), .certificate)
        }
        _ = try credentials.0.makeConfiguration(applicationProtocols: ["h2"])
        return credentials
    }
}
