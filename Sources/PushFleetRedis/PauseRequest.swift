/// A worker's request to pause a campaign, waiting in Redis for the coordinator.
public struct PauseRequest: Hashable, Sendable {
    /// What APNs answered, for people: `InvalidProviderToken (HTTP 403) for team …`.
    public var reason: String
    /// APNs itself failed (5xx, 429 past the retries): the coordinator resumes the campaign later.
    /// Otherwise the provider's credentials or topic are wrong, and only an operator can resume.
    public var isOutage: Bool

    public init(reason: String, isOutage: Bool) {
        self.reason = reason
        self.isOutage = isOutage
    }
}
