public import APNSWire
public import Crypto
import CoreMetrics
import Foundation
import NIOConcurrencyHelpers

/// The process's provider token for one team: loads the `.p8` signing key once, signs a token when
/// ``ProviderTokenRenewal`` says so, and hands every connection the same cached token.
///
/// Share one signer between every sender and connection of the process: APNs counts token updates
/// per team, and a token per connection or per worker thread is how other senders earn
/// `TooManyProviderTokenUpdates`. The key and the token are never logged; `description` names only
/// the key id and team id.
public final class ProviderTokenSigner: Sendable, CustomStringConvertible {
    public let keyID: String
    public let teamID: String
    private let key: P256.Signing.PrivateKey
    private let now: @Sendable () -> Int64
    private let state: NIOLockedValueBox<State>

    private struct State {
        var renewal: ProviderTokenRenewal
        var token: ProviderToken?
        var signed = 0
    }

    /// Loads the signing key.
    /// - Parameters:
    ///   - keyPath: the `.p8` file Apple issued: a P-256 private key, PKCS#8 PEM.
    ///   - keyID: the key's 10-character id (`kid`).
    ///   - teamID: the 10-character team id (`iss`).
    ///   - renewalInterval: seconds between tokens; defaults to 3000 (50 minutes), kept within 20–60 minutes.
    ///   - now: the clock, epoch seconds. Defaults to the system clock; tests pass their own.
    /// - Throws: ``TransportError`` naming the file when it is missing, unreadable or not a P-256 key.
    public convenience init(
        keyPath: String, keyID: String, teamID: String, renewalInterval: Int64 = 50 * 60,
        now: (@Sendable () -> Int64)? = nil
    ) throws {
        let text: String
        do {
            text = try String(contentsOfFile: keyPath, encoding: .utf8)
        } catch {
            throw TransportError.unusableCredential(what: "provider-token key (.p8)", path: keyPath, underlying: "cannot read the file (\(Self.describe(error)))")
        }
        let key: P256.Signing.PrivateKey
        do {
            key = try P256.Signing.PrivateKey(pemRepresentation: text)
        } catch {
            throw TransportError.unusableCredential(what: "provider-token key (.p8)", path: keyPath, underlying: "not a P-256 private key in PKCS#8 PEM")
        }
        self.init(key: key, keyID: keyID, teamID: teamID, renewalInterval: renewalInterval, now: now)
    }

    /// A signer over a key already in memory.
    public init(
        key: P256.Signing.PrivateKey, keyID: String, teamID: String, renewalInterval: Int64 = 50 * 60,
        now: (@Sendable () -> Int64)? = nil
    ) {
        self.key = key
        self.keyID = keyID
        self.teamID = teamID
        self.now = now ?? { Int64(Date().timeIntervalSince1970) }
        self.state = NIOLockedValueBox(State(renewal: ProviderTokenRenewal(interval: renewalInterval)))
    }

    /// The current token, signed now if there is none or it is due for renewal.
    /// - Throws: if signing fails (it does not with a valid key).
    public func current() throws -> ProviderToken {
        let now = self.now()
        return try self.state.withLockedValue { state in
            if let token = state.token, !state.renewal.needsToken(now: now) { return token }
            return try self.sign(&state, now: now)
        }
    }

    /// APNs answered `ExpiredProviderToken` to a request carrying `token`. Signs a new token unless
    /// that one was already replaced (many streams report the same expiry) or an early renewal
    /// happened in the last 20 minutes. Returns the token to use from now on.
    @discardableResult
    public func renew(expired token: ProviderToken) throws -> ProviderToken {
        let now = self.now()
        return try self.state.withLockedValue { state in
            if state.renewal.expiredReported(tokenIssuedAt: token.issuedAt, now: now) || state.token == nil {
                return try self.sign(&state, now: now)
            }
            return state.token!
        }
    }

    /// Tokens signed by this signer so far.
    public var tokensSigned: Int { self.state.withLockedValue { $0.signed } }

    public var description: String { "ProviderTokenSigner(keyID: \(self.keyID), teamID: \(self.teamID))" }

    private func sign(_ state: inout State, now: Int64) throws -> ProviderToken {
        let token = try ProviderToken.sign(keyID: self.keyID, teamID: self.teamID, issuedAt: now, key: self.key)
        state.token = token
        state.renewal.signed(issuedAt: now)
        state.signed += 1
        TransportMetrics.providerTokensSigned.increment()
        return token
    }

    private static func describe(_ error: any Error) -> String {
        let nsError = error as NSError
        if nsError.domain == NSCocoaErrorDomain, nsError.code == NSFileReadNoSuchFileError { return "no such file" }
        return nsError.localizedDescription
    }
}
