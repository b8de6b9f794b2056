public import PushFleetCore

/// What `send` keeps of a sender's outcomes, whichever protocol it spoke.
public protocol DeliveryTally {
    var accepted: Int { get set }
    /// Rejections by reason, refusals of the provider included.
    var rejected: [String: Int] { get set }
    var rejectedTokens: [(DeviceToken, Rejection)] { get set }
}

extension DeliveryTally {
    /// Adds `outcomes`: a provider-level refusal counts as its token's rejection, by its reason.
    public mutating func count(_ outcomes: [DeliveryOutcome]) {
        for outcome in outcomes {
            switch outcome {
            case .accepted:
                self.accepted += 1
            case .rejected(_, let rejection):
                self.rejected[rejection.reason.rawValue, default: 0] += 1
                self.rejectedTokens.append((rejection.token, rejection))
            case .refused(_, let token, let refusal):
                self.rejected[refusal.reason.rawValue, default: 0] += 1
                self.rejectedTokens.append((token, Rejection(token: token, reason: refusal.reason)))
            }
        }
    }
}
