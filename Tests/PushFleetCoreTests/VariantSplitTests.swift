import PushFleetCore
import Testing

/// The split of a split test: the same token always gets the same variant for one salt, shares
/// follow the weights, and another salt splits otherwise.
@Suite struct VariantSplitTests {
    static func tokens(_ count: Int) throws -> [DeviceToken] {
        try (0..<count).map { index in
            try DeviceToken(bytes: (0..<32).map { UInt8(truncatingIfNeeded: ($0 &* 131) ^ (index &* 7_919) ^ (index >> ($0 % 16))) })
        }
    }

    @Test func sharesFollowTheWeightsAndTheSplitIsStable() throws {
        let tokens = try Self.tokens(100_000)
        for weights in [[50, 50], [10, 30, 60], [1, 99], [1]] {
            let split = VariantSplit(weights: weights, salt: 0x5eed)
            var counts = Array(repeating: 0, count: weights.count)
            for token in tokens { counts[split.variant(of: token)] += 1 }
            let total = weights.reduce(0, +)
            for (index, weight) in weights.enumerated() {
                let expected = Double(tokens.count) * Double(weight) / Double(total)
                // Within 5 standard deviations of a binomial draw.
                let sigma = (expected * (1 - Double(weight) / Double(total))).squareRoot()
                #expect(abs(Double(counts[index]) - expected) <= 5 * sigma + 1, "weights \(weights): variant \(index) got \(counts[index]), expected about \(expected)")
            }
            let again = VariantSplit(weights: weights, salt: 0x5eed)
            #expect(tokens.allSatisfy { split.variant(of: $0) == again.variant(of: $0) })
        }
    }

    @Test func anotherSaltSplitsTheSameAudienceOtherwise() throws {
        let tokens = try Self.tokens(10_000)
        let (a, b) = (VariantSplit(weights: [50, 50], salt: 1), VariantSplit(weights: [50, 50], salt: 2))
        let same = tokens.count { a.variant(of: $0) == b.variant(of: $0) }
        // Independent halves agree about half the time.
        #expect(same > 4_500 && same < 5_500, "\(same) of 10,000 agree")
    }
}
