#if canImport(Glibc)
import Glibc
#endif
public import PushFleetCore

/// Told of each batch a ``FileTokenSource`` reads: a progress bar, say.
public protocol AudienceReadProgress {
    /// `count` more tokens were read; `ended` when the file is.
    mutating func advance(by count: Int, ended: Bool)
}

/// A token file (or standard input) as a launch audience; errors name the file and line.
public struct FileTokenSource: TokenSource {
    public let reader: TokenFileReader
    /// Required size of every token in bytes (32 for the binary protocol), or `nil`.
    let requiredSize: Int?
    /// Told after each batch.
    var progress: (any AudienceReadProgress)?
    /// Tokens alone (``PersonalizedFileTokenSource`` packs the values of a template's fields).
    public var batchValues: RecipientValueList? { nil }

    public init(reader: TokenFileReader, requiredSize: Int?, progress: (any AudienceReadProgress)? = nil) {
        self.reader = reader
        self.requiredSize = requiredSize
        self.progress = progress
    }

    public mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let tokens = try self.reader.read(upTo: maximum)
        self.progress?.advance(by: tokens.count, ended: tokens.isEmpty)
        if let required = self.requiredSize, let wrong = tokens.firstIndex(where: { $0.count != required }) {
            throw AudienceFileError("\(self.reader.path):\(self.reader.lineOf(tokenAtBatchIndex: wrong)): \(DeviceTokenError.wrongSize(byteCount: tokens[wrong].count, required: required, protocolName: "binary protocol"))")
        }
        return tokens
    }
}

/// An audience file whose recipients' fields fill a payload template: each recipient's values
/// packed as its shard will keep them, and the payload rendered from them checked against the
/// format's limit. Errors name the file and line.
public struct PersonalizedFileTokenSource: TokenSource {
    var tokens: FileTokenSource
    let template: PayloadTemplate
    let format: PayloadFormat
    public private(set) var batchValues: RecipientValueList? = RecipientValueList()

    /// - Parameter tokens: read with ``TokenFileReader/fields`` the template's fields, in order.
    public init(_ tokens: FileTokenSource, template: PayloadTemplate, format: PayloadFormat) {
        precondition(tokens.reader.fields == template.fields)
        self.tokens = tokens
        self.template = template
        self.format = format
    }

    public mutating func next(upTo maximum: Int) async throws -> [DeviceToken] {
        let batch = try await self.tokens.next(upTo: maximum)
        let reader = self.tokens.reader
        if !batch.isEmpty, !reader.hasFields {
            throw AudienceFileError(
                "\(reader.path): the payload is a template (it names \(self.template.fields.map { "{{\($0)}}" }.joined(separator: ", "))), "
                    + "but the audience has no fields: give CSV with a header line, or JSON lines"
            )
        }
        var packed = RecipientValueList()
        try reader.withBatchValues { values in
            for index in batch.indices {
                try Self.append(to: &packed, self.template, format: self.format, reader: reader, index: index) { values[token: index, field: $0] }
            }
        }
        self.batchValues = packed
        return batch
    }

    /// ``RecipientValues/append(to:_:format:utf8:)`` for recipient `index` of the reader's batch,
    /// whose value of the template's field `i` is `utf8(i)`; a refusal names its line.
    static func append(
        to list: inout RecipientValueList, _ template: PayloadTemplate, format: PayloadFormat, reader: TokenFileReader, index: Int,
        utf8: (Int) -> UnsafeBufferPointer<UInt8>?
    ) throws {
        do {
            try RecipientValues.append(to: &list, template, format: format, utf8: utf8)
        } catch {
            throw AudienceFileError("\(reader.path):\(reader.lineOf(tokenAtBatchIndex: index)): \(error)")
        }
    }
}

/// A token file with fields per recipient (or without: then every recipient has none) planned by
/// its tokens, locales and time zones (the reader's first two fields); errors name the file and line.
/// The recipients of a part whose payload is a template get their values packed from the fields
/// after those, each rendering checked against the format's limit.
public struct FilePlannedTokenSource: PlannedTokenSource {
    var tokens: FileTokenSource
    public private(set) var plan: LaunchPlan
    public private(set) var batchValues: RecipientValueList?
    /// Each part's template, and where the reader holds each of its fields, as parts are made.
    private var templates: [(template: PayloadTemplate, fields: [Int])?] = []
    let format: PayloadFormat

    /// - Parameter tokens: read with ``TokenFileReader/fields`` the locale's and the zone's
    ///   fields, then every field the plan's templates name (``fields(of:)``).
    public init(_ tokens: FileTokenSource, plan: LaunchPlan, format: PayloadFormat) {
        self.tokens = tokens
        self.plan = plan
        self.format = format
    }

    /// The fields the templates among `payloads` name, each once, in order.
    public static func fields(of payloads: [Payload]) -> [String] {
        var fields: [String] = []
        for payload in payloads {
            for field in ((try? PayloadTemplate(payload.bytes)) ?? nil)?.fields ?? [] where !fields.contains(field) { fields.append(field) }
        }
        return fields
    }

    public mutating func next(upTo maximum: Int) async throws -> [(token: DeviceToken, part: Int)] {
        let batch = try await self.tokens.next(upTo: maximum)
        let reader = self.tokens.reader
        let recipients = batch.enumerated().map { index, token in (token, reader.value(0, ofTokenAt: index), reader.value(1, ofTokenAt: index)) }
        let planned = try self.plan.parts(of: recipients) { index, error in
            AudienceFileError("\(reader.path):\(reader.lineOf(tokenAtBatchIndex: index)): \(error)")
        }
        while self.templates.count < self.plan.parts.count {
            self.templates.append(self.plan.parts[self.templates.count].template.map { template in
                (template, template.fields.map { reader.fields.firstIndex(of: $0)! })
            })
        }
        guard self.templates.contains(where: { $0 != nil }) else {
            self.batchValues = nil
            return planned
        }
        if !batch.isEmpty, !reader.hasFields {
            throw AudienceFileError("\(reader.path): a payload of this launch is a template, but the audience has no fields: give CSV with a header line, or JSON lines")
        }
        var packed = RecipientValueList()
        try reader.withBatchValues { values in
            for (index, recipient) in planned.enumerated() {
                guard let (template, fields) = self.templates[recipient.part] else {
                    packed.append([])
                    continue
                }
                try PersonalizedFileTokenSource.append(to: &packed, template, format: self.format, reader: reader, index: index) {
                    values[token: index, field: fields[$0]]
                }
            }
        }
        self.batchValues = packed
        return planned
    }
}
