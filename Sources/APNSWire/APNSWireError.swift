/// A violation of an APNs wire format found while decoding.
public struct APNSWireError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable { case unexpectedCommand, invalidFeedbackToken, truncated, frameTooLarge }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public static let unexpectedCommand = Self(.unexpectedCommand)
        public static let invalidFeedbackToken = Self(.invalidFeedbackToken)
        public static let truncated = Self(.truncated)
        public static let frameTooLarge = Self(.frameTooLarge)
        public var description: String { self.base.rawValue }
    }

    public let code: Code
    public let message: String
    public let file: String
    public let line: Int
    public var description: String { "\(self.message) (\(self.file):\(self.line))" }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    static func unexpectedCommand(_ command: UInt8, expected: UInt8, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .unexpectedCommand, message: "received command \(command) where command \(expected) was expected", file: file, line: line)
    }

    static func invalidFeedbackToken(byteCount: Int, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .invalidFeedbackToken, message: "feedback tuple carries a \(byteCount)-byte token", file: file, line: line)
    }

    static func truncated(byteCount: Int, what: String, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .truncated, message: "connection closed with \(byteCount) bytes of an incomplete \(what)", file: file, line: line)
    }
}
