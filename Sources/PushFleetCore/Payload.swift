/// A notification payload: compact UTF-8 JSON whose size has been checked against a format's limit.
///
/// Build one with ``APSPayload`` or from JSON text with ``init(jsonText:format:)``. The bytes are made
/// once per campaign and shared by every notification, never re-serialized per token.
public struct Payload: Hashable, Sendable {
    /// The serialized JSON object, compact, in UTF-8.
    public let bytes: [UInt8]
    /// The format the size was checked against.
    public let format: PayloadFormat

    /// Serializes `value` compactly and checks it.
    /// - Throws: ``PayloadError`` if `value` is not an object or is over the format's limit.
    public init(_ value: JSONValue, format: PayloadFormat) throws(PayloadError) {
        guard case .object = value else { throw .notAnObject() }
        let bytes = value.compactUTF8
        guard bytes.count <= format.maximumByteCount else { throw .tooLarge(byteCount: bytes.count, format: format) }
        self.bytes = bytes
        self.format = format
    }

    /// Parses JSON text (as an operator would pass it to `--payload`), re-serializes it compactly and
    /// checks the size of the compact form.
    public init(jsonText: some Collection<UInt8>, format: PayloadFormat) throws(PayloadError) {
        let value: JSONValue
        do {
            value = try JSONParser.parse(jsonText)
        } catch {
            throw .invalidJSON(error)
        }
        try self.init(value, format: format)
    }

    /// A personalized campaign's payload for one recipient, as its ``PayloadTemplate`` rendered
    /// it: JSON by construction (the template's payload was checked, and values are escaped), and
    /// checked for size when the campaign was launched, so neither is checked again per token. A
    /// payload over the limit all the same is APNs' to refuse.
    public init(rendered bytes: [UInt8], format: PayloadFormat) {
        self.bytes = bytes
        self.format = format
    }

    /// The size of the payload in bytes.
    public var byteCount: Int { self.bytes.count }
}

/// Why a payload was refused.
public struct PayloadError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable { case invalidJSON, notAnObject, tooLarge }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public static let invalidJSON = Self(.invalidJSON)
        public static let notAnObject = Self(.notAnObject)
        public static let tooLarge = Self(.tooLarge)
        public var description: String { self.base.rawValue }
    }

    public let code: Code
    public let message: String
    public var description: String { self.message }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    static func invalidJSON(_ error: JSONParseError) -> Self {
        Self(code: .invalidJSON, message: "the payload is not valid JSON: \(error)")
    }

    static func notAnObject() -> Self {
        Self(code: .notAnObject, message: "the payload must be a JSON object (usually with an \"aps\" dictionary)")
    }

    static func tooLarge(byteCount: Int, format: PayloadFormat) -> Self {
        let limit = format.maximumByteCount
        return Self(
            code: .tooLarge,
            message: "the payload is \(byteCount) bytes as compact UTF-8 JSON, \(byteCount - limit) bytes over the \(limit)-byte limit of the \(format)"
        )
    }
}
