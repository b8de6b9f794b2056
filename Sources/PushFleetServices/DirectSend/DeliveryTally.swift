public import PushFleetCore

/// What `send` keeps of a sender's outcomes, whichever protocol it spoke.
public protocol DeliveryTally {
    var accepted: Int { get set }
    /// Every token refused, in the order the answers came; a refusal of the provider as its
    /// token's rejection.
    var rejections: [Rejection] { get set }
    /// Those of ``rejections`` that are APNs failing (5xx or 429 past the retries, no answer on any
    /// attempt), not a verdict on the token or the provider: sending them later may succeed.
    var outages: Int { get set }
    /// Those of ``rejections`` that are the provider refused (its credentials, topic or
    /// certificate, or a gateway certificate it does not trust), by reason: the same answer would
    /// come for every token, and no retry cures it.
    var refusals: [RejectionReason: Int] { get set }
}

extension DeliveryTally {
    /// Adds `outcomes`.
    public mutating func count(_ outcomes: [DeliveryOutcome]) {
        for outcome in outcomes {
            switch outcome {
            case .accepted: self.accepted += 1
            case .rejected(_, let rejection): self.rejections.append(rejection)
            case .refused(_, let token, let refusal):
                self.rejections.append(Rejection(token: token, reason: refusal.reason))
                if refusal.isOutage { self.outages += 1 } else { self.refusals[refusal.reason, default: 0] += 1 }
            }
        }
    }

    /// Rejections by reason.
    public var rejected: [String: Int] {
        self.rejections.reduce(into: [:]) { counts, rejection in counts[rejection.reason.rawValue, default: 0] += 1 }
    }
}
