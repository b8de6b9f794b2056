public import Crypto
import Foundation
import PushFleetCore

/// An APNs provider token: a compact ES256 JSON Web Token, `header.claims.signature`, each part
/// base64url without padding. The header carries `alg` (always `ES256`) and `kid` (the key id);
/// the claims carry `iss` (the team id) and `iat` (issued-at, epoch seconds).
///
/// The client signs one with ``sign(keyID:teamID:issuedAt:key:)``; the simulator reads one back
/// with ``init(parsing:)`` and checks it with ``isSignatureValid(for:)``.
public struct ProviderToken: Hashable, Sendable {
    /// The key id (`kid`), 10 characters at Apple.
    public let keyID: String
    /// The team id (`iss`), 10 characters at Apple.
    public let teamID: String
    /// Issued-at (`iat`), seconds since 1970 UTC.
    public let issuedAt: Int64
    /// The token as sent after `bearer `.
    public let compact: String
    private let signingInputLength: Int
    private let signature: [UInt8]

    /// Signs a token with a P-256 key (the `.p8` file's).
    public static func sign(keyID: String, teamID: String, issuedAt: Int64, key: P256.Signing.PrivateKey) throws -> ProviderToken {
        var header = JSONValue.object([("alg", .string("ES256")), ("kid", .string(keyID))]).compactUTF8
        var claims = JSONValue.object([("iss", .string(teamID)), ("iat", .integer(Int(issuedAt)))]).compactUTF8
        let signingInput = Base64URL.encode(&header) + "." + Base64URL.encode(&claims)
        let signature = try key.signature(for: Array(signingInput.utf8)).rawRepresentation
        var raw = Array(signature)
        return ProviderToken(
            keyID: keyID, teamID: teamID, issuedAt: issuedAt, compact: signingInput + "." + Base64URL.encode(&raw),
            signingInputLength: signingInput.utf8.count, signature: raw
        )
    }

    private init(keyID: String, teamID: String, issuedAt: Int64, compact: String, signingInputLength: Int, signature: [UInt8]) {
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
        self.compact = compact
        self.signingInputLength = signingInputLength
        self.signature = signature
    }

    /// Reads a compact token; the signature is not checked here.
    /// - Throws: ``ProviderTokenError`` saying which part is malformed.
    public init(parsing compact: String) throws(ProviderTokenError) {
        let parts = compact.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw ProviderTokenError("has \(parts.count) dot-separated parts, not 3") }
        guard let headerBytes = Base64URL.decode(parts[0]), let claimsBytes = Base64URL.decode(parts[1]) else {
            throw ProviderTokenError("header or claims are not base64url")
        }
        guard let signature = Base64URL.decode(parts[2]), signature.count == 64 else {
            throw ProviderTokenError("signature is not 64 bytes of base64url")
        }
        let header: JSONValue
        let claims: JSONValue
        do {
            header = try JSONParser.parse(headerBytes)
            claims = try JSONParser.parse(claimsBytes)
        } catch {
            throw ProviderTokenError("header or claims are not JSON: \(error)")
        }
        guard case .string("ES256") = header["alg"] else { throw ProviderTokenError("alg is not ES256") }
        guard case .string(let keyID) = header["kid"], !keyID.isEmpty else { throw ProviderTokenError("kid is missing") }
        guard case .string(let teamID) = claims["iss"], !teamID.isEmpty else { throw ProviderTokenError("iss is missing") }
        guard case .number(let iatText) = claims["iat"], let issuedAt = Int64(iatText) else {
            throw ProviderTokenError("iat is not an integer")
        }
        self.init(
            keyID: keyID, teamID: teamID, issuedAt: issuedAt, compact: compact,
            signingInputLength: parts[0].count + 1 + parts[1].count, signature: signature
        )
    }

    /// Whether the signature is that of `publicKey` over the header and claims.
    public func isSignatureValid(for publicKey: P256.Signing.PublicKey) -> Bool {
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: self.signature) else { return false }
        return publicKey.isValidSignature(signature, for: Array(self.compact.utf8.prefix(self.signingInputLength)))
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.compact == rhs.compact }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.compact) }
}

/// A provider token that cannot be read.
public struct ProviderTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    public let reason: String
    init(_ reason: String) { self.reason = reason }
    public var description: String { "malformed provider token: \(self.reason)" }
}

/// base64url without padding (RFC 7515 §2).
enum Base64URL {
    static func encode(_ bytes: inout [UInt8]) -> String {
        var text = Data(bytes).base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.last == "=" { text.removeLast() }
        return text
    }

    static func decode(_ text: some Collection<UInt8>) -> [UInt8]? {
        var standard = [UInt8]()
        standard.reserveCapacity(text.count + 3)
        for byte in text {
            switch byte {
            case UInt8(ascii: "-"): standard.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): standard.append(UInt8(ascii: "/"))
            case UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): return nil
            default: standard.append(byte)
            }
        }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(standard)).map { Array($0) }
    }
}
