/// How a split test (`launch --variant A=…:50 --variant B=…:50`) shares its audience: each
/// recipient gets one variant, by the token and the campaign's salt alone, so the same launch
/// splits the same way every time, and in proportion to the weights.
public struct VariantSplit: Sendable, Hashable {
    /// The weights, one per variant, in order; each at least 1.
    public let weights: [Int]
    /// Mixed into every token's hash: two campaigns split the same audience differently.
    public let salt: UInt64
    private let total: UInt64

    /// - Precondition: at least one weight, each at least 1.
    public init(weights: [Int], salt: UInt64) {
        precondition(!weights.isEmpty && weights.allSatisfy { $0 >= 1 }, "variant weights are at least 1")
        self.weights = weights
        self.salt = salt
        self.total = UInt64(weights.reduce(0, +))
    }

    /// The index of `token`'s variant.
    public func variant(of token: DeviceToken) -> Int {
        // SplitMix64 of the fingerprint and the salt, then scaled to the weights' total (the high
        // half of a 64 × 64-bit product: no modulo bias worth the name).
        let hash = TokenFingerprint.mix(token.fingerprint ^ self.salt)
        var point = hash.multipliedFullWidth(by: self.total).high
        for (index, weight) in self.weights.enumerated() {
            if point < UInt64(weight) { return index }
            point -= UInt64(weight)
        }
        return self.weights.count - 1
    }
}
