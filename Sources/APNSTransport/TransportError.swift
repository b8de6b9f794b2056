/// A failure to reach or talk to APNs. APNs saying "no" to a notification is not an error: it is an
/// outcome. Messages name the host and port, or the file, never a secret.
public struct TransportError: Error, Hashable, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable { case unusableCredential, connectionFailed, senderClosed, incompleteRead }
        private let base: Base
        private init(_ base: Base) { self.base = base }
        public static let unusableCredential = Self(.unusableCredential)
        public static let connectionFailed = Self(.connectionFailed)
        public static let senderClosed = Self(.senderClosed)
        public static let incompleteRead = Self(.incompleteRead)
        public var description: String { self.base.rawValue }
    }

    public let code: Code
    public let message: String
    public let file: String
    public let line: Int
    public var description: String { self.message }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(self.code) }

    static func unusableCredential(what: String, path: String, underlying: Any, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .unusableCredential, message: "cannot use the \(what) at \(path): \(underlying)", file: file, line: line)
    }

    static func connectionFailed(host: String, port: Int, underlying: Any, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .connectionFailed, message: "cannot connect to \(host):\(port): \(underlying)", file: file, line: line)
    }

    static func incompleteRead(host: String, port: Int, what: String, underlying: Any, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .incompleteRead, message: "the read of \(what) at \(host):\(port) ended early: \(underlying)", file: file, line: line)
    }

    static func senderClosed(host: String, port: Int, file: String = #fileID, line: Int = #line) -> Self {
        Self(code: .senderClosed, message: "the sender to \(host):\(port) was shut down", file: file, line: line)
    }
}
