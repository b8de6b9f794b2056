public import Foundation
import PushFleetCore
import PushFleetPostgres

/// Launches a campaign in parts (``LaunchPlan``): one campaign per part, each an ordinary campaign
/// (its own queue, counts, guarantees and `status`), under the launch's id, which `status`,
/// `campaign pause|resume|cancel|set-rate` and the API take for all of them at once.
///
/// The audience is read once: every token is checked, duplicates are dropped (the first line of a
/// token decides its part, so no one gets two; a duplicate is counted with the part its own line
/// names), and each part's recipients are set aside in a temporary file (``AudienceSpill``),
/// before anything is created. A local-time part whose start passed while the audience was read
/// starts at once. A bad line, or a split test's variant
/// that would get no one, fails the launch and creates nothing. Then each part is launched from its
/// file. The parts' ids follow from the launch's id and their names, so launching again with the
/// same id changes nothing, or finishes what a launch that died left undone.
public struct PartitionedLauncher: Sendable {
    public struct Result: Sendable, Hashable {
        /// The launch's id.
        public var id: UUID
        /// Each part's campaign, in order of start, then as the plan made them.
        public var parts: [PartResult]
        /// Whether any part's campaign was created now.
        public var created: Bool { self.parts.contains { $0.launch.created } }
        public var total: Int { self.parts.reduce(0) { $0 + $1.launch.total } }

        /// The parts as `launch --json` and `POST /v1/campaigns` print them, in order.
        /// The launch as `launch --json` prints it: its id, recipients, whether any part was created
        /// now, and the parts (``summaries(variants:)``). `POST /v1/campaigns` answers it with
        /// `href`, where to follow it, and `"split": true`, as its other answers of a launch in parts.
        public func json(variants: [SplitTest.Variant], href: String? = nil) -> String {
            PushFleetJSON.encode(LaunchedInPartsJSON(result: self, variants: variants, href: href))
        }

        public func summaries(variants: [SplitTest.Variant]) -> [PartSummary] {
            self.parts.map { p in
                PartSummary(
                    name: p.part.name, id: p.launch.id, weight: variants.first { $0.name == p.part.payloadName }?.weight,
                    total: p.launch.total, startsAt: p.part.startsAt, created: p.launch.created
                )
            }
        }
    }

    /// One part in JSON: its name, campaign id, weight (a split test's variants only), total,
    /// start (local-time parts only) and whether it was created now. A part without a weight or
    /// a start has no such field (not `null`).
    public struct PartSummary: Sendable, Hashable, Encodable {
        public var name: String
        public var id: UUID
        public var weight: Int?
        public var total: Int
        public var startsAt: Date?
        public var created: Bool

        enum CodingKeys: String, CodingKey {
            case name, id, weight, total
            case startsAt = "starts_at"
            case created
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(self.name, forKey: .name)
            try container.encode(self.id.uuidString.lowercased(), forKey: .id)
            try container.encodeIfPresent(self.weight, forKey: .weight)
            try container.encode(self.total, forKey: .total)
            try container.encodeIfPresent(self.startsAt.map(StatusReport.timestamp), forKey: .startsAt)
            try container.encode(self.created, forKey: .created)
        }
    }

    public struct PartResult: Sendable, Hashable {
        public var part: LaunchPart
        public var launch: Launcher.Result
    }

    public let launcher: Launcher

    public init(launcher: Launcher) { self.launcher = launcher }

    /// Launches the parts. `request` is the common part: its id, if any, is the launch's; its
    /// payload and start are the parts'; a rate limit is shared between parts that start together,
    /// in proportion to their recipients.
    /// - Throws: ``LaunchError`` for a bad token, an empty audience or a variant without
    ///   recipients; nothing is created then. Errors of Redis and Postgres as they come (launch
    ///   again with the same id to finish).
    public func launch(_ request: Launcher.Request, recipients: inout some PlannedTokenSource) async throws -> Result {
        let id = request.id ?? UUID()
        let spill = try AudienceSpill()
        var counts: [Int] = []
        var duplicates: [Int] = []
        var seen = TokenFingerprintSet()
        // Whether each part is personalized, as the plan makes them.
        var personalized: [Bool] = []
        while true {
            let batch = try await recipients.next(upTo: 4_096)
            if batch.isEmpty { break }
            let values = recipients.batchValues
            let parts = recipients.plan.parts
            while personalized.count < parts.count { personalized.append(parts[personalized.count].template != nil) }
            if let values { precondition(values.count == batch.count, "a source gives values for every recipient or none") }
            var valuesAt = 0
            for (token, part) in batch {
                // This recipient's values (empty unless its part is personalized), and the next's.
                var mine: Range<Int>? = nil
                if let values { (mine, valuesAt) = values.values(at: valuesAt) }
                if let required = request.requiredTokenSize, token.count != required {
                    throw LaunchError.wrongTokenSize(token.count, required: required)
                }
                while counts.count <= part {
                    counts.append(0)
                    duplicates.append(0)
                }
                guard seen.insert(token) else {
                    duplicates[part] += 1
                    continue
                }
                counts[part] += 1
                if personalized[part] {
                    guard let values, let mine else {
                        // Only an audience file carries the fields a template needs.
                        throw LaunchError(
                            message: "the payload of part \(parts[part].name) is a template ({{…}}), but this audience gives no fields to fill it"
                        )
                    }
                    try spill.append(token, values: values.bytes[mine], to: part)
                } else {
                    try spill.append(token, to: part)
                }
            }
        }
        try spill.finish()
        let plan = recipients.plan
        let parts = plan.parts
        guard counts.reduce(0, +) > 0 else { throw LaunchError.emptyAudience() }
        for name in plan.requiredPayloadNames where !parts.indices.contains(where: { parts[$0].payloadName == name && counts[$0] > 0 }) {
            throw LaunchError.emptyVariant(name, audience: counts.reduce(0, +))
        }
        // Launched before: only the same parts and audience may finish it (others would give
        // some recipients a second part).
        if request.id != nil {
            for record in try await self.launcher.store.variants(of: id) {
                guard let index = parts.firstIndex(where: { $0.name == record.variant }),
                    record.total + record.duplicatesDropped == counts[index] + duplicates[index]
                else {
                    throw LaunchError.splitDiffers(id, variant: record.variant ?? "?")
                }
            }
        }
        // Parts that start together share the rate limit.
        var startingTogether: [Date?: Int] = [:]
        for (index, part) in parts.enumerated() { startingTogether[part.startsAt, default: 0] += counts[index] }
        let order = parts.indices.sorted { a, b in
            (parts[a].startsAt ?? .distantPast, a) < (parts[b].startsAt ?? .distantPast, b)
        }
        var results: [PartResult] = []
        for index in order where counts[index] > 0 {
            let part = parts[index]
            var child = request
            child.id = Self.campaignID(launch: id, part: part.name)
            child.definition.payload = part.payload.bytes
            child.split = SplitMembership(id: id, variant: part.name)
            // A local-time part whose start passed while the audience was read starts at once.
            child.startsAt = part.startsAt.map { $0 > Date() ? $0 : nil } ?? request.startsAt
            child.duplicatesDroppedEarlier = duplicates[index]
            child.definition.personalized = personalized[index]
            child.definition.rateLimit = request.definition.rateLimit.map { max(1, Int(Int64($0) * Int64(counts[index]) / Int64(startingTogether[part.startsAt] ?? 1))) }
            var source = spill.tokens(of: index, personalized: personalized[index])
            results.append(PartResult(part: part, launch: try await self.launcher.launch(child, tokens: &source)))
        }
        return Result(id: id, parts: results)
    }

    /// A part's campaign id, from the launch's id and the part's name: the same every time.
    public static func campaignID(launch: UUID, part: String) -> UUID {
        let source = withUnsafeBytes(of: launch.uuid) { Array($0) } + Array(part.utf8)
        var bytes = [UInt8](repeating: 0, count: 16)
        for half in 0..<2 {
            // FNV-1a over the launch's id and the name, a different start for each half.
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

/// Each part's recipients while a launch in parts creates its campaigns, in one temporary file:
/// chunks of about 16 KiB of one part's recipients each (a byte of length, then the token's
/// bytes, then for a personalized part the values' length in LEB128 and the values), written as
/// a part's buffer fills. One descriptor whatever the number of parts, and the
/// file is unlinked as soon as it is made, so nothing is left behind however the launch ends.
final class AudienceSpill {
    private let descriptor: Int32
    private let directory: String
    private var end: Int64 = 0
    private var buffers: [[UInt8]] = []
    private var chunks: [[(offset: Int64, count: Int)]] = []

    static let chunkSize = 16 * 1024

    init() throws {
        self.directory = NSTemporaryDirectory()
        var template = Array((self.directory + "/pushfleet-launch.XXXXXX").utf8CString)
        let descriptor = mkstemp(&template)
        guard descriptor >= 0 else { throw Self.failure("create", in: self.directory) }
        unlink(template)
        self.descriptor = descriptor
    }

    deinit { close(self.descriptor) }

    /// Sets `token` aside for `part`, with its packed `values` when the part is personalized.
    func append(_ token: DeviceToken, values: ArraySlice<UInt8>? = nil, to part: Int) throws {
        while self.buffers.count <= part {
            self.buffers.append([])
            self.chunks.append([])
        }
        self.buffers[part].append(UInt8(token.count))
        token.withUnsafeBytes { self.buffers[part].append(contentsOf: $0) }
        if let values {
            LEB128.append(values.count, to: &self.buffers[part])
            self.buffers[part].append(contentsOf: values)
        }
        if self.buffers[part].count >= Self.chunkSize { try self.flush(part) }
    }

    /// Writes what the buffers hold: call once, after the last ``append(_:to:)``.
    func finish() throws {
        for part in self.buffers.indices where !self.buffers[part].isEmpty { try self.flush(part) }
    }

    private func flush(_ part: Int) throws {
        let count = self.buffers[part].count
        let written = self.buffers[part].withUnsafeBytes { pwrite(self.descriptor, $0.baseAddress, count, off_t(self.end)) }
        guard written == count else { throw Self.failure("write", in: self.directory) }
        self.chunks[part].append((self.end, count))
        self.end += Int64(count)
        self.buffers[part].removeAll(keepingCapacity: true)
    }

    /// Part `part`'s recipients, in the order appended, with their values if it is `personalized`.
    func tokens(of part: Int, personalized: Bool) -> SpilledTokens {
        SpilledTokens(spill: self, chunks: self.chunks.indices.contains(part) ? self.chunks[part] : [], personalized: personalized)
    }

    fileprivate func read(_ chunk: (offset: Int64, count: Int)) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: chunk.count)
        let read = bytes.withUnsafeMutableBytes { pread(self.descriptor, $0.baseAddress, chunk.count, off_t(chunk.offset)) }
        guard read == chunk.count else { throw Self.failure("read", in: self.directory) }
        return bytes
    }

    private static func failure(_ verb: String, in directory: String) -> LaunchError {
        LaunchError(message: "cannot \(verb) the launch's temporary file in \(directory): \(String(cString: strerror(errno)))")
    }
}

/// The recipients ``AudienceSpill`` keeps for one part, read back in order.
struct SpilledTokens: TokenSource {
    let spill: AudienceSpill
    let chunks: [(offset: Int64, count: Int)]
    let personalized: Bool
    private var next = 0
    private(set) var batchValues: RecipientValueList?

    init(spill: AudienceSpill, chunks: [(offset: Int64, count: Int)], personalized: Bool) {
        self.spill = spill
        self.chunks = chunks
        self.personalized = personalized
    }

    mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        var tokens: [DeviceToken] = []
        var values = RecipientValueList()
        // Whole chunks (a chunk holds some hundreds of tokens): a little over `maximum` at most.
        while tokens.count < maximum, self.next < self.chunks.count {
            let bytes = try self.spill.read(self.chunks[self.next])
            self.next += 1
            try bytes.withUnsafeBytes { raw in
                var index = 0
                while index < raw.count {
                    let length = Int(raw[index])
                    tokens.append(try DeviceToken(bytes: UnsafeRawBufferPointer(rebasing: raw[(index + 1)..<(index + 1 + length)])))
                    index += 1 + length
                    guard self.personalized else { continue }
                    guard let count = LEB128.read(raw, at: &index), count <= raw.count - index else {
                        throw LaunchError(message: "the launch's temporary file holds a malformed recipient")
                    }
                    values.append(Array(raw[index..<(index + count)]))
                    index += count
                }
            }
        }
        self.batchValues = self.personalized ? values : nil
        return tokens
    }
}

/// The object of ``PartitionedLauncher/Result/json(variants:href:)``.
private struct LaunchedInPartsJSON: Encodable {
    let result: PartitionedLauncher.Result
    let variants: [SplitTest.Variant]
    let href: String?

    enum CodingKeys: String, CodingKey {
        case id, split, total, created, variants, href
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.result.id.uuidString.lowercased(), forKey: .id)
        if self.href != nil { try container.encode(true, forKey: .split) }
        try container.encode(self.result.total, forKey: .total)
        try container.encode(self.result.created, forKey: .created)
        try container.encode(self.result.summaries(variants: self.variants), forKey: .variants)
        try container.encodeIfPresent(self.href, forKey: .href)
    }
}
