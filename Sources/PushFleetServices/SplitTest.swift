public import Foundation
public import PushFleetCore
import PushFleetPostgres

/// A split test (`launch --variant A=@a.json:50 --variant B=@b.json:50`): one campaign per variant,
/// each with the share of the audience ``VariantSplit`` gives it and its own payload, under the
/// split test's id. It is launched in parts (``PartitionedLauncher``), the variants being the
/// parts' payloads (``payloads(_:id:)``), and may also deliver at each recipient's local time.
public enum SplitTest {
    public struct Variant: Sendable, Hashable {
        /// 1 to 64 letters, digits, `-` or `_`.
        public var name: String
        public var payload: Payload
        /// Its share of the audience, relative to the others' (at least 1).
        public var weight: Int

        public init(name: String, payload: Payload, weight: Int) {
            self.name = name
            self.payload = payload
            self.weight = weight
        }
    }

    /// The most variants one split test has.
    public static let maximumVariants = 26
    /// The weights a variant may have (their products with a rate limit stay far from overflow).
    public static let weights = 1...1_000_000

    /// The plan's payloads for a split test of these variants under the id `id`.
    /// - Throws: ``LaunchError`` unless the variants pass ``check(_:)``.
    public static func payloads(_ variants: [Variant], id: UUID) throws -> LaunchPlan.Payloads {
        try Self.check(variants)
        return .variants(
            VariantSplit(weights: variants.map(\.weight), salt: Self.salt(id)), names: variants.map(\.name), payloads: variants.map(\.payload)
        )
    }

    /// Throws ``LaunchError`` unless there are 2 to ``maximumVariants`` variants with distinct
    /// names of letters, digits, `-` and `_` (1 to 64 of them) and weights of at least 1.
    public static func check(_ variants: [Variant]) throws {
        guard (2...Self.maximumVariants).contains(variants.count) else { throw LaunchError.badVariants("a split test has 2 to \(Self.maximumVariants) variants, not \(variants.count)") }
        for variant in variants {
            guard (1...64).contains(variant.name.utf8.count),
                variant.name.unicodeScalars.allSatisfy({ ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || $0 == "-" || $0 == "_" })
            else {
                throw LaunchError.badVariants("a variant's name is 1 to 64 letters, digits, '-' or '_', not \"\(variant.name)\"")
            }
            guard Self.weights.contains(variant.weight) else {
                throw LaunchError.badVariants("variant \(variant.name) has weight \(variant.weight); weights are 1 to \(Self.weights.upperBound)")
            }
        }
        guard Set(variants.map(\.name)).count == variants.count else { throw LaunchError.badVariants("two variants have the same name") }
    }

    /// The split's salt: the split test's id, so that two split tests of one audience split it
    /// independently.
    public static func salt(_ id: UUID) -> UInt64 {
        withUnsafeBytes(of: id.uuid) { $0.load(as: UInt64.self) }
    }

    /// A variant's campaign id, from the split test's id and the variant's name: the same every time.
    public static func campaignID(split: UUID, variant: String) -> UUID {
        PartitionedLauncher.campaignID(launch: split, part: variant)
    }
}
