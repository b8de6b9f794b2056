public import Crypto

/// A provider-token signing key the HTTP/2 gateway knows: tokens naming `keyID` must be signed by
/// it and issued by `teamID`.
///
/// This folder (the request validator, the provider-token authenticator and this key) needs
/// nothing but APNSWire, PushFleetCore and Crypto, so that the fuzz package can compile it alone.
public struct MockAPNSProviderKey: Sendable {
    /// The key id (`kid`), 10 characters at Apple.
    public var keyID: String
    /// The team the key belongs to (`iss`).
    public var teamID: String
    /// The public half of the `.p8` key.
    public var publicKey: P256.Signing.PublicKey

    public init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
    }
}
