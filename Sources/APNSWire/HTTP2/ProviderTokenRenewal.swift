/// When a process signs a new provider token. Pure: the caller passes the time, in epoch seconds.
///
/// APNs wants a token refreshed "no more than once every 20 minutes and no less than once every 60
/// minutes", rejects one older than an hour with `ExpiredProviderToken`, and answers
/// `TooManyProviderTokenUpdates` (and refuses the connection for a while) to a token replaced sooner.
/// So a process holds one token per team, shared by every connection:
///
/// | situation | renew? |
/// |---|---|
/// | no token yet | yes |
/// | token older than ``interval`` (default 50 minutes, kept within 20–60) | yes |
/// | APNs answered `ExpiredProviderToken` to the current token, and no early renewal in 20 minutes | yes, now |
/// | `ExpiredProviderToken` for a token already replaced | no: the answer raced the renewal |
/// | anything else | no |
public struct ProviderTokenRenewal: Hashable, Sendable {
    /// 20 minutes: APNs' minimum time between two tokens.
    public static let minimumInterval: Int64 = 20 * 60
    /// 60 minutes: APNs rejects older tokens.
    public static let maximumInterval: Int64 = 60 * 60

    /// Seconds after which the token is renewed, within 20 and 60 minutes.
    public let interval: Int64
    /// `iat` of the current token.
    public private(set) var issuedAt: Int64?
    private var lastEarlyRenewal: Int64?

    /// - Parameter interval: seconds between renewals. Defaults to 3000 (50 minutes); clamped to 1200...3600.
    public init(interval: Int64 = 50 * 60) {
        self.interval = min(max(interval, Self.minimumInterval), Self.maximumInterval)
    }

    /// Whether a new token must be signed before the next request.
    public func needsToken(now: Int64) -> Bool {
        guard let issuedAt = self.issuedAt else { return true }
        return now - issuedAt >= self.interval
    }

    /// Records that a token issued at `issuedAt` is now the current one.
    public mutating func signed(issuedAt: Int64) {
        self.issuedAt = issuedAt
    }

    /// APNs answered `ExpiredProviderToken` to a request that carried the token issued at
    /// `tokenIssuedAt`. Returns whether to sign a new one now, and if so records the early renewal;
    /// the caller then signs and calls ``signed(issuedAt:)``.
    public mutating func expiredReported(tokenIssuedAt: Int64, now: Int64) -> Bool {
        guard tokenIssuedAt == self.issuedAt else { return false }
        if let last = self.lastEarlyRenewal, now - last < Self.minimumInterval { return false }
        self.lastEarlyRenewal = now
        return true
    }
}
