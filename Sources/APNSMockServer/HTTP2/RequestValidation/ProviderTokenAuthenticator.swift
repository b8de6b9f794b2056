import APNSWire
import Crypto
import PushFleetCore

/// Decides, for one HTTP/2 connection, whether a request's `authorization` header authenticates it,
/// following APNs' token rules. Performs no I/O; time comes in as an argument.
///
/// Checked in this order:
/// 1. once the connection was answered `ExpiredProviderToken`, every later request is answered so
///    too: APNs does not recover a connection whose token it declared stale;
/// 2. no `authorization` header, or an empty one → `MissingProviderToken`;
/// 3. the token just accepted on this connection again → accepted, unless its `iat` is now more than
///    an hour old (step 8); signatures are not checked twice;
/// 4. not `bearer <JWT>`, or the JWT is malformed → `InvalidProviderToken`;
/// 5. unknown `kid`, signature not that key's, or `iss` not the key's team → `InvalidProviderToken`;
/// 6. a team other than the one the connection's first accepted token named → `InvalidProviderToken`;
/// 7. a key (`kid`) other than the one of the connection's first accepted token →
///    `UnrelatedKeyIdInToken`: APNs asks for a new connection per key;
/// 8. `iat` more than one hour old → `ExpiredProviderToken` (and the connection is wedged, step 1);
/// 9. a new token (another `iat` than the current one's; the same claims signed again are the same
///    token) within 20 minutes of the current one's acceptance → 429 `TooManyProviderTokenUpdates`;
///    the current token stays valid.
struct ProviderTokenAuthenticator {
    enum Verdict: Equatable {
        case accepted
        case rejected(RejectionReason)
    }

    static let maximumTokenAge: Int64 = 3_600_000
    static let minimumUpdateInterval: Int64 = 1_200_000

    private let keys: [String: MockAPNSProviderKey]
    private var team: String? = nil
    private var current: (header: String, keyID: String, issuedAt: Int64, acceptedAt: Int64)? = nil
    private(set) var isWedged = false

    init(keys: [String: MockAPNSProviderKey]) {
        self.keys = keys
    }

    /// - Parameters:
    ///   - authorization: the `authorization` header's value, if any.
    ///   - now: milliseconds since 1970.
    mutating func authenticate(authorization: String?, now: Int64) -> Verdict {
        if self.isWedged { return .rejected(.expiredProviderToken) }
        guard let authorization, !authorization.isEmpty else { return .rejected(.missingProviderToken) }
        if let current = self.current, current.header == authorization {
            return self.checkAge(issuedAt: current.issuedAt, now: now)
        }
        guard authorization.utf8.count > 7, authorization.lowercased().hasPrefix("bearer ") else {
            return .rejected(.invalidProviderToken)
        }
        let token: ProviderToken
        do {
            token = try ProviderToken(parsing: String(authorization.dropFirst(7)))
        } catch {
            return .rejected(.invalidProviderToken)
        }
        guard let key = self.keys[token.keyID], key.teamID == token.teamID, token.isSignatureValid(for: key.publicKey) else {
            return .rejected(.invalidProviderToken)
        }
        if let team = self.team, team != token.teamID { return .rejected(.invalidProviderToken) }
        if let current = self.current, current.keyID != token.keyID { return .rejected(.unrelatedKeyIdInToken) }
        let age = self.checkAge(issuedAt: token.issuedAt * 1000, now: now)
        guard age == .accepted else { return age }
        if let current = self.current, current.issuedAt == token.issuedAt * 1000 {
            self.current = (authorization, token.keyID, current.issuedAt, current.acceptedAt)
            return .accepted
        }
        if let current = self.current, now - current.acceptedAt < Self.minimumUpdateInterval {
            return .rejected(.tooManyProviderTokenUpdates)
        }
        self.team = token.teamID
        self.current = (authorization, token.keyID, token.issuedAt * 1000, now)
        return .accepted
    }

    private mutating func checkAge(issuedAt: Int64, now: Int64) -> Verdict {
        guard now - issuedAt <= Self.maximumTokenAge else {
            self.isWedged = true
            return .rejected(.expiredProviderToken)
        }
        return .accepted
    }
}
