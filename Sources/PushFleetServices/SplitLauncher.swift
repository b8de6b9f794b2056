public import Foundation
public import PushFleetCore
public import PushFleetPostgres

/// A split test (`launch --variant A=@a.json:50 --variant B=@b.json:50`): one campaign per variant,
/// each with the share of the audience ``VariantSplit`` gives it and its own payload, under the
/// split test's id. Each variant is an ordinary campaign (its own queue, counts, guarantees and
/// `status`); `status` of the split test's id shows them side by side and their sum.
///
/// The audience is read once to check every token and count each variant's share before anything
/// is created (a bad line, or a variant that would get no one, fails the launch and creates
/// nothing), then once per variant. The variants' ids follow from the split test's id and their
/// names, so launching again with the same id changes nothing, or finishes what a launch that
/// died left undone.
public struct SplitLauncher: Sendable {
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

    public struct Result: Sendable, Hashable {
        /// The split test's id.
        public var id: UUID
        /// Each variant's campaign, in the order given.
        public var variants: [VariantResult]
        /// Whether any variant's campaign was created now.
        public var created: Bool { self.variants.contains { $0.launch.created } }
        public var total: Int { self.variants.reduce(0) { $0 + $1.launch.total } }
    }

    public struct VariantResult: Sendable, Hashable {
        public var name: String
        public var weight: Int
        public var launch: Launcher.Result
    }

    public let launcher: Launcher

    public init(launcher: Launcher) { self.launcher = launcher }

    /// The most variants one split test has.
    public static let maximumVariants = 26
    /// The weights a variant may have (their products with a rate limit stay far from overflow).
    public static let weights = 1...1_000_000

    /// Launches the split test. `request` is the common part (its id, if any, is the split
    /// test's; its payload is ignored); a rate limit is shared between the variants by weight.
    /// - Parameter tokens: a fresh source of the whole audience, each time it is called.
    /// - Throws: ``LaunchError`` for bad variants, a bad token or a variant without recipients;
    ///   nothing is created then. Errors of Redis and Postgres as they come (launch again with the
    ///   same id to finish).
    public func launch(
        _ request: Launcher.Request, variants: [Variant], tokens: () throws -> some TokenSource
    ) async throws -> Result {
        try Self.check(variants)
        let id = request.id ?? UUID()
        let split = VariantSplit(weights: variants.map(\.weight), salt: Self.salt(id))
        // Every token checked, and each variant's share counted, before anything is created.
        var counts = Array(repeating: 0, count: variants.count)
        var all = try tokens()
        while true {
            let batch = try await all.next(upTo: 4_096)
            if batch.isEmpty { break }
            for token in batch {
                if let required = request.requiredTokenSize, token.count != required {
                    throw LaunchError.wrongTokenSize(token.count, required: required)
                }
                counts[split.variant(of: token)] += 1
            }
        }
        guard counts.reduce(0, +) > 0 else { throw LaunchError.emptyAudience() }
        if let empty = counts.firstIndex(of: 0) {
            throw LaunchError.emptyVariant(variants[empty].name, audience: counts.reduce(0, +))
        }
        // Launched before: only the same variants, weights and audience may finish it (others
        // would give some recipients a second variant).
        if request.id != nil {
            let earlier = try await self.launcher.store.variants(of: id)
            for record in earlier {
                guard let index = variants.firstIndex(where: { $0.name == record.variant }),
                    record.total + record.duplicatesDropped == counts[index]
                else {
                    throw LaunchError.splitDiffers(id, variant: record.variant ?? "?")
                }
            }
        }
        let totalWeight = variants.reduce(0) { $0 + $1.weight }
        var results: [VariantResult] = []
        for (index, variant) in variants.enumerated() {
            var child = request
            child.id = Self.campaignID(split: id, variant: variant.name)
            child.payload = variant.payload
            child.split = SplitMembership(id: id, variant: variant.name)
            child.rateLimit = request.rateLimit.map { max(1, $0 * variant.weight / totalWeight) }
            var source = VariantTokenSource(inner: try tokens(), split: split, variant: index)
            results.append(VariantResult(name: variant.name, weight: variant.weight, launch: try await self.launcher.launch(child, tokens: &source)))
        }
        return Result(id: id, variants: results)
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
        let source = withUnsafeBytes(of: split.uuid) { Array($0) } + Array(variant.utf8)
        var bytes = [UInt8](repeating: 0, count: 16)
        for half in 0..<2 {
            // FNV-1a over the split test's id and the name, a different start for each half.
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(half)
            for byte in source { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
            hash = TokenFingerprint.mix(hash)
            withUnsafeBytes(of: hash.bigEndian) { for (offset, byte) in $0.enumerated() { bytes[half * 8 + offset] = byte } }
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x80  // version 8: a name-derived id of PushFleet's own
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}

/// The tokens of one variant of a split test, read from the whole audience.
struct VariantTokenSource<Inner: TokenSource>: TokenSource {
    var inner: Inner
    let split: VariantSplit
    let variant: Int

    mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        while true {
            let batch = try await self.inner.next(upTo: maximum)
            if batch.isEmpty { return [] }
            let mine = batch.filter { self.split.variant(of: $0) == self.variant }
            if !mine.isEmpty { return mine }
        }
    }
}
