/// Why a device token could not be parsed. The message names the column of the offending character,
/// counted from 1 within the token text.
public struct DeviceTokenError: Error, Hashable, Sendable, CustomStringConvertible {
    /// What kind of problem this is; stable across releases and compared by `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case empty, invalidCharacter, oddDigitCount, tooLong, wrongSize
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        public static let empty = Self(.empty)
        public static let invalidCharacter = Self(.invalidCharacter)
        public static let oddDigitCount = Self(.oddDigitCount)
        public static let tooLong = Self(.tooLong)
        public static let wrongSize = Self(.wrongSize)

        public var description: String { self.base.rawValue }
    }

    public let code: Code
    /// A sentence for a person: what is wrong and where.
    public let message: String

    public var description: String { self.message }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    static func empty() -> Self {
        Self(code: .empty, message: "the token is empty")
    }

    static func invalidCharacter(_ byte: UInt8, column: Int) -> Self {
        let shown = (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
        return Self(code: .invalidCharacter, message: "\(shown) at column \(column) is not a hexadecimal digit")
    }

    static func oddDigitCount(_ digits: Int) -> Self {
        Self(code: .oddDigitCount, message: "the token has \(digits) hex digits; a token is whole bytes, so the count must be even")
    }

    static func tooLong(byteCount: Int) -> Self {
        Self(code: .tooLong, message: "the token is \(byteCount) bytes; at most \(DeviceToken.maximumByteCount) are accepted")
    }

    /// The token has a size the chosen protocol does not accept.
    public static func wrongSize(byteCount: Int, required: Int, protocolName: String) -> Self {
        Self(code: .wrongSize, message: "the token is \(byteCount) bytes (\(byteCount * 2) hex digits); the \(protocolName) requires exactly \(required) bytes (\(required * 2) hex digits)")
    }
}
